from setuptools import find_packages, setup

setup(
    name="posmix_fairseq",
    version="0.1.0",
    description="Position-based token mixing for fairseq NMT: aPosNet/rPosNet, Shaw, relative attention",
    packages=find_packages(include=["posmix_fairseq", "posmix_fairseq.*"]),
    license="MIT",
    classifiers=["License :: OSI Approved :: MIT License", "Programming Language :: Python :: 3.11",
                 "Programming Language :: Python :: 3.12"],
    # Tested on the CPU only: CPython 3.11, torch 2.13.0, fairseq-fixed 0.12.3.1; the GPU routes are simulated
    # on the CPU (docs/gpu.md). 3.12 is allowed (the offline GPU-host install targets it), not yet tested.
    python_requires=">=3.11,<3.13",
    # torch and fairseq are NOT requirements: pip would replace the environment's own (a CUDA torch,
    # a lab's fairseq fork or git checkout). `python -m posmix_fairseq.harness.environment` checks them and
    # says what to install; scripts/install.sh installs only what is missing; scripts/setup.sh builds
    # the whole tested stack (torch 2.13.0, fairseq-fixed 0.12.3.1: constraints.txt) in .venv. Never
    # list plain `fairseq` anywhere: pip would fetch 0.12.2, which does not import on Python 3.11.
    install_requires=["sacrebleu>=2", "sentencepiece", "sacremoses", "matplotlib", "tensorboardX"],
    entry_points={"console_scripts": [
        "posmix-score=posmix_fairseq.harness.evaluation.score:cli",
        "posmix-average=posmix_fairseq.harness.evaluation.average:cli",
        "posmix-length-bins=posmix_fairseq.harness.evaluation.length_bins:cli",
        "posmix-concat-testset=posmix_fairseq.harness.evaluation.concat_testset:cli",
        "posmix-decode-speed=posmix_fairseq.harness.evaluation.decode_speed:cli",
        "posmix-attention=posmix_fairseq.harness.evaluation.attention:cli",
        "posmix-contrastive=posmix_fairseq.harness.evaluation.contrastive:cli",
        "posmix-reproduce=posmix_fairseq.harness.evaluation.reproduce:cli",
        "posmix-claims=posmix_fairseq.harness.evaluation.claims:cli",
        "posmix-bench-kernels=posmix_fairseq.harness.benchmarks.kernels:cli",
        "posmix-bench-gpu=posmix_fairseq.harness.benchmarks.gpu:cli",
        "posmix-bench-decode=posmix_fairseq.harness.benchmarks.decode:cli",
        "posmix-bench-search-attention=posmix_fairseq.harness.benchmarks.search_attention:cli",
        "posmix-bench-train-step=posmix_fairseq.harness.benchmarks.train_step:cli",
        "posmix-bench-gaussian-window=posmix_fairseq.harness.benchmarks.gaussian_window:cli",
        "posmix-freeze=posmix_fairseq.harness.freeze:cli",
        "posmix-plot=posmix_fairseq.harness.figures.plot:cli",
        "posmix-forward-time=posmix_fairseq.harness.evaluation.forward_time:cli",
        "posmix-ngram-orders=posmix_fairseq.harness.evaluation.ngram_orders:cli",
        "posmix-options=posmix_fairseq.harness.options:cli",
    ]},
    # triton: the GPU kernels (posmix_fairseq.kernels runs without it); Linux x86-64 wheels only, and the
    # version must be the one the installed torch requires (3.6 for torch 2.11, 3.7.1 for torch 2.13).
    # mtdata: the recipes' download stage with --mtdata (corpora by mtdata's dataset IDs, its cache)
    extras_require={"eval": ["unbabel-comet==2.2.7", "bleurt-pytorch==0.0.1"], "test": ["pytest"], "mtdata": ["mtdata>=0.4"],
                    "triton": ["triton>=3.6,<4; platform_system == 'Linux' and platform_machine == 'x86_64'"]},
)
