"""The research harness: what sits on top of the library and drives it.

Evaluation (``posmix-score`` and the analyses), recipes and paper-table reproduction, figures,
benchmarks, the synthetic corpus, raw-text preparation and the model builders shared by tests and
benchmarks; and the commands' shared parts (``command``, ``checkpoint_files``), ``posmix-freeze``
(``freeze``) and the environment check (``environment``). The harness may import the library
(``posmix_fairseq.core``, ``mixers``, ``models``, ...); the library, which fairseq's ``--user-dir``
loads, never imports the harness (``tests/test_import_floors.py``).
"""
