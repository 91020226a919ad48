"""For every architecture: incremental decoding (with beam reordering) equals the full
teacher-forced forward, and a sentence's outputs do not depend on its batch or padding."""
import torch
import torch.nn.functional as F
from fairseq.sequence_generator import SequenceGenerator

from conftest import build_model, random_batch

TOL = 1e-5


def full_log_probs(model, src_tokens, src_lengths, prev_output_tokens):
    logits, _ = model(src_tokens, src_lengths, prev_output_tokens)
    return F.log_softmax(logits.double(), dim=-1)


def test_incremental_equals_full_forward_with_beam_reordering(any_config):
    name, flags = any_config
    model, d = build_model(flags)
    # two sentences x beam 2, laid out as beam search does (rows 0-1: sentence A, 2-3: B)
    src, src_len = random_batch(d, [7, 11], seed=1)
    src, src_len = src.repeat_interleave(2, dim=0), src_len.repeat_interleave(2)
    tgt, _ = random_batch(d, [10, 10, 10, 10], seed=2)
    prev = torch.cat([torch.full((4, 1), d.eos()), tgt[:, :-1]], dim=1)
    with torch.no_grad():
        full = full_log_probs(model, src, src_len, prev)
        encoder_out = model.encoder(src, src_len)
        state = {}
        rows = torch.arange(4)
        for t in range(prev.size(1)):
            if t in (3, 6):  # beam search reorders (and duplicates) hypotheses within a beam
                new_order = torch.tensor([1, 1, 3, 2]) if t == 3 else torch.tensor([1, 0, 2, 2])
                model.decoder.reorder_incremental_state_scripting(state, new_order)
                encoder_out = model.encoder.reorder_encoder_out(encoder_out, new_order)
                rows = rows[new_order]
            step_logits, _ = model.decoder(prev[rows, : t + 1], encoder_out=encoder_out, incremental_state=state)
            step = F.log_softmax(step_logits[:, -1].double(), dim=-1)
            diff = (step - full[rows, t]).abs().max().item()
            assert diff <= TOL, f"{name}: step {t} differs from the full forward by {diff:.2e}"


def test_sentence_alone_equals_sentence_in_padded_batch(any_config):
    name, flags = any_config
    model, d = build_model(flags)
    for left_pad in (True, False):
        src, src_len = random_batch(d, [6, 13, 9], seed=3, left_pad=left_pad)
        tgt, _ = random_batch(d, [5, 8, 8], seed=4, left_pad=False)  # targets: right padded
        prev = torch.cat([torch.full((3, 1), d.eos()), tgt[:, :-1]], dim=1)
        prev[0, 5:] = d.pad()
        with torch.no_grad():
            batch = full_log_probs(model, src, src_len, prev)
            for i, (n_src, n_tgt) in enumerate([(6, 5), (13, 8), (9, 8)]):
                row = src[i]
                alone_src = row[row.ne(d.pad())].unsqueeze(0)
                alone = full_log_probs(model, alone_src, src_len[i: i + 1], prev[i: i + 1, :n_tgt])
                diff = (alone[0] - batch[i, :n_tgt]).abs().max().item()
                assert diff <= TOL, f"{name} (left_pad={left_pad}): sentence {i} alone vs batch {diff:.2e}"


def test_beam_search_translation_alone_equals_padded_batch(any_config):
    name, flags = any_config
    model, d = build_model(flags, seed=5)
    generator = SequenceGenerator([model], d, beam_size=3, max_len_b=12)
    src, src_len = random_batch(d, [5, 12, 8], seed=6)
    with torch.no_grad():
        batch = generator.forward({"net_input": {"src_tokens": src, "src_lengths": src_len}})
        for i in range(3):
            row = src[i][src[i].ne(d.pad())].unsqueeze(0)
            alone = generator.forward({"net_input": {"src_tokens": row, "src_lengths": src_len[i: i + 1]}})
            assert alone[0][0]["tokens"].tolist() == batch[i][0]["tokens"].tolist(), name
            assert abs(alone[0][0]["score"].item() - batch[i][0]["score"].item()) < 1e-4, name
