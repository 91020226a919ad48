"""How linearnet_p256.pt, posnet_embed_gelu.pt and at5_cumulative.pt were made: tiny checkpoints
of the code that stored no readings marker (commit bf005a5), their arguments stored as it stored them,
and the log-probs they gave, added to expected_log_probs.pt. Not a test; rerun only to remake them:

    mkdir -p /tmp/oldcode && git archive bf005a5 posmix_fairseq tests/helpers.py | tar -x -C /tmp/oldcode
    PYTHONPATH=/tmp/oldcode python tests/data/legacy_checkpoints/make_checkpoints_without_readings_marker.py \
        tests/data/legacy_checkpoints
"""
import os, sys, copy
sys.path.insert(0, "/tmp/oldcode/tests")
import torch
import torch.nn.functional as F
from fairseq.data import Dictionary
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from fairseq.models import ARCH_MODEL_REGISTRY
from helpers import parse_model_args, random_batch
import posmix_fairseq
assert posmix_fairseq.__file__.startswith("/tmp/oldcode"), posmix_fairseq.__file__
LEGACY = sys.argv[1]
template = torch.load(os.path.join(LEGACY, "posnet_attn.pt"), weights_only=False)
d = Dictionary.load(os.path.join(LEGACY, "dict.src.txt"))
expected = torch.load(os.path.join(LEGACY, "expected_log_probs.pt"), weights_only=False)
CASES = {"linearnet_p256": ["--arch", "glinearnet_iwslt_de_en", "--encoder-layers", "1", "--decoder-layers", "1",
                            "--encoder-attention-heads", "2", "--decoder-attention-heads", "2"],
         "posnet_embed_gelu": ["--arch", "posnet_embed_iwslt_de_en"],
         "at5_cumulative": ["--arch", "at5bias_iwslt_de_en"]}
for i, (name, flags) in enumerate(CASES.items()):
    args = parse_model_args(flags + ["--max-source-positions", "48", "--max-target-positions", "48"])
    task = TranslationTask(TranslationConfig(data=LEGACY), d, d)
    torch.manual_seed(10 + i)
    model = ARCH_MODEL_REGISTRY[args.arch].build_model(args, task).eval()
    with torch.no_grad():  # move every parameter off its init so the check is not trivial
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    src, src_len = random_batch(d, [9, 6, 4], seed=i)
    prev, _ = random_batch(d, [7, 7, 5], seed=100 + i, left_pad=False)
    with torch.no_grad():
        logits, _ = model(src, src_len, prev)
    expected[name] = dict(src_tokens=src, src_lengths=src_len, prev_output_tokens=prev,
                          log_probs=F.log_softmax(logits.double(), -1))
    state = copy.copy(template)
    cfg = copy.deepcopy(template["cfg"])
    cfg["model"] = args
    state["cfg"], state["model"] = cfg, model.state_dict()
    torch.save(state, os.path.join(LEGACY, f"{name}.pt"))
    print(name, sum(p.numel() for p in model.parameters()), vars(args).get("encoder_self_linear_max_positions"))
torch.save(expected, os.path.join(LEGACY, "expected_log_probs.pt"))
