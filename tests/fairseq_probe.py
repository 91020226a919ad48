"""Run fairseq-train as its console script does and record what the machinery tests compare.

``fairseq-train`` is ``fairseq_cli.train.cli_main``: parse the arguments, convert them to
fairseq's config and hand ``fairseq_cli.train.main`` to ``distributed_utils.call_main`` (which
joins the process group when distributed flags are given). ``train_and_record`` does exactly
that, observing two methods of fairseq's ``Trainer`` without changing what they do:

- ``_reduce_and_log_stats`` receives each update's logging outputs after fairseq summed them
  over the micro-batches (``--update-freq``) and over the workers (all-reduce): the update's loss
  is ``sum(loss) / sum(sample_size)`` in full precision (fairseq's own log rounds to 3 digits),
  and its gradient norm (after the all-reduce) comes with it;
- ``train_step`` hands over the trainer, whose model's parameters are read after training.

Every rank records its own copy, so a test can check that the ranks end with identical
parameters (fairseq saves a checkpoint on rank 0 only).

As a script (one process of a distributed run)::

    python tests/fairseq_probe.py RECORD.pt <fairseq-train arguments>
"""
import contextlib
import sys


import torch  # noqa: E402
from fairseq import distributed_utils, options  # noqa: E402
from fairseq.dataclass.utils import convert_namespace_to_omegaconf  # noqa: E402
from fairseq.trainer import Trainer  # noqa: E402
from fairseq_cli import train  # noqa: E402


@contextlib.contextmanager
def recording():
    record = {"losses": [], "grad_norms": [], "trainer": None}
    original_step, original_reduce = Trainer.train_step, Trainer._reduce_and_log_stats

    def train_step(self, samples, raise_oom=False):
        record["trainer"] = self
        return original_step(self, samples, raise_oom)

    def reduce_and_log_stats(self, logging_outputs, sample_size, grad_norm=None):
        if logging_outputs is not None and grad_norm is not None:  # None: validation
            loss = sum(float(log.get("loss", 0.0)) for log in logging_outputs)
            record["losses"].append(loss / float(sample_size))
            record["grad_norms"].append(float(grad_norm))
        return original_reduce(self, logging_outputs, sample_size, grad_norm)

    Trainer.train_step, Trainer._reduce_and_log_stats = train_step, reduce_and_log_stats
    try:
        yield record
    finally:
        Trainer.train_step, Trainer._reduce_and_log_stats = original_step, original_reduce


def train_and_record(argv):
    """Run ``fairseq-train argv`` in this process; return {losses, grad_norms, params, rank}."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, list(argv))
    with recording() as record:
        distributed_utils.call_main(convert_namespace_to_omegaconf(args), train.main)
    trainer = record["trainer"]
    assert trainer is not None, "fairseq-train ran no update"
    return {
        "losses": record["losses"],
        "grad_norms": record["grad_norms"],
        "params": {name: p.detach().clone() for name, p in trainer.get_model().named_parameters()},
        "rank": trainer.data_parallel_rank,
    }


if __name__ == "__main__":
    out, fairseq_args = sys.argv[1], sys.argv[2:]
    torch.save(train_and_record(fairseq_args), out)
