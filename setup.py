from setuptools import find_packages, setup

setup(
    name="posmix_fairseq",
    version="0.1.0",
    description="Position-based token mixing for fairseq NMT: aPosNet/rPosNet, Shaw, relative attention",
    packages=find_packages(include=["posmix_fairseq", "posmix_fairseq.*"]),
    python_requires=">=3.10",
    # fairseq-fixed provides the `fairseq` import package on Python 3.11; never list plain
    # `fairseq` (pip would fetch 0.12.2, which does not import on 3.11). torch is pinned in
    # constraints.txt: scripts/setup.sh installs the whole stack in a working order.
    # Triton (posmix_fairseq.kernels) has wheels for Linux x86-64 only; >= 3.6 covers torch 2.11 (3.6.0)
    # and torch 2.13 (3.7.1, pinned in constraints.txt).
    install_requires=["fairseq-fixed==0.12.3.1", "torch", "sacrebleu>=2", "sentencepiece", "sacremoses", "matplotlib", "tensorboardX",
                      "triton>=3.6,<4; platform_system == 'Linux' and platform_machine == 'x86_64'"],
    entry_points={"console_scripts": [
        "posmix-score=posmix_fairseq.harness.evaluation.score:cli",
        "posmix-average=posmix_fairseq.harness.evaluation.average:cli",
        "posmix-length-bins=posmix_fairseq.harness.evaluation.length_bins:cli",
        "posmix-concat-testset=posmix_fairseq.harness.evaluation.concat_testset:cli",
        "posmix-decode-speed=posmix_fairseq.harness.evaluation.decode_speed:cli",
        "posmix-attention=posmix_fairseq.harness.evaluation.attention:cli",
        "posmix-contrastive=posmix_fairseq.harness.evaluation.contrastive:cli",
        "posmix-reproduce=posmix_fairseq.harness.evaluation.reproduce:cli",
        "posmix-bench-kernels=posmix_fairseq.harness.benchmarks.kernels:cli",
        "posmix-bench-gpu=posmix_fairseq.harness.benchmarks.gpu:cli",
        "posmix-bench-decode=posmix_fairseq.harness.benchmarks.decode:cli",
        "posmix-bench-search-attention=posmix_fairseq.harness.benchmarks.search_attention:cli",
        "posmix-bench-train-step=posmix_fairseq.harness.benchmarks.train_step:cli",
        "posmix-bench-gaussian-window=posmix_fairseq.harness.benchmarks.gaussian_window:cli",
        "posmix-freeze=posmix_fairseq.freeze:cli",
        "posmix-plot=posmix_fairseq.harness.figures.plot:cli",
        "posmix-forward-time=posmix_fairseq.harness.evaluation.forward_time:cli",
        "posmix-ngram-orders=posmix_fairseq.harness.evaluation.ngram_orders:cli",
    ]},
    extras_require={"eval": ["unbabel-comet==2.2.7", "bleurt-pytorch==0.0.1"], "test": ["pytest"]},
)
