"""The per-task recipes (examples/<task>/run.sh): their settings with where each comes from
(:mod:`.settings`), their stages and PLAN=1 (:mod:`.stages`, :mod:`.plan`), the data (:mod:`.download`,
:mod:`.prepare_data`), and generation within the model's position limits (:mod:`.generate`,
:mod:`.position_limits`)."""
