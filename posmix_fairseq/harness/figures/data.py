"""Reading what the analysis commands write, for the figures.

Every reader names the file and the option in its errors; nothing is guessed.

- ``posmix-score --json`` (and the ``scores.<system>.json`` of the recipes and ``posmix-reproduce``):
  ``{"rows": [{"system", "metric", "score", ...}]}``;
- ``posmix-length-bins --json``: ``{"bins": [{"bin", "sentences", "<system>/<metric>": score, ...}], "signatures"}``;
- ``posmix-attention``: ``argmax_distance.csv`` and ``attention_maps/sentence<ID>.json``;
- ``posmix-contrastive --json``: ``{"by_category": ..., "by_distance": {type: {bin: {correct, total}}}}``;
- ``posmix-forward-time --json`` and ``posmix-ngram-orders --json``: see those commands.
"""
import csv
import io
import os
from typing import Dict, List, Optional, Sequence, Tuple

from .. import command
from ..paper_tables import TABLES, slug


class FigureInputError(ValueError):
    """Bad or missing input for a figure: the message names the file or option and what is valid."""


def read_json(path: str, what: str):
    try:
        return command.read_json(path, what=what)
    except command.CommandError as e:
        raise FigureInputError(f"{e} ({what})") from None


def parse_pairs(items: Sequence[str], option: str, example: str) -> List[Tuple[str, str]]:
    """'LABEL=PATH' items -> [(label, path)], in the order given."""
    pairs = []
    for item in items or []:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise FigureInputError(f"{option} {item!r}: expected LABEL=PATH, e.g. {option} {example}")
        pairs.append((label, path))
    return pairs


def score_systems(path: str) -> Dict[str, Dict[str, float]]:
    """{system: {metric: score}} of a ``posmix-score --json`` file."""
    data = read_json(path, "posmix-score --json output")
    if not isinstance(data, dict) or "rows" not in data:
        raise FigureInputError(f"{path}: no 'rows' (expected a posmix-score --json output)")
    out: Dict[str, Dict[str, float]] = {}
    for row in data["rows"]:
        out.setdefault(row["system"], {})[row["metric"]] = float(row["score"])
    return out


def system_scores(path: str, system: Optional[str] = None) -> Dict[str, float]:
    """{metric: score} of one system of a ``posmix-score --json`` file: ``system`` if the file has it,
    else the file's only system."""
    systems = score_systems(path)
    if system in systems:
        return systems[system]
    if len(systems) == 1:
        return next(iter(systems.values()))
    raise FigureInputError(f"{path}: {len(systems)} systems ({', '.join(systems)}) and none named {system!r}; "
                           "name the system as the label (LABEL=PATH) or give a file with one system")


def metric_of(scores: Dict[str, float], metric: str, path: str, option: str = "--metric") -> float:
    if metric not in scores:
        raise FigureInputError(f"{path}: no {metric} score (it has {', '.join(scores) or 'none'}); "
                               f"pass {option} with one of these")
    return scores[metric]


def length_bins(path: str):
    """(bins [(label, sentences)], {system: {metric: [score per bin]}}) of a ``posmix-length-bins --json``
    file; a bin without sentences is absent from the file (the command prints it as '-')."""
    data = read_json(path, "posmix-length-bins --json output")
    rows = data.get("bins") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict) or "bin" not in rows[0]:
        raise FigureInputError(f"{path}: expected the bins that posmix-length-bins --json writes ({{\"bins\": [...]}})")
    bins = [(r["bin"], int(r["sentences"])) for r in rows]
    scores: Dict[str, Dict[str, List[float]]] = {}
    for r in rows:
        for key, value in r.items():
            if "/" not in key:
                continue
            system, metric = key.rsplit("/", 1)
            scores.setdefault(system, {}).setdefault(metric, []).append(float(value))
    return bins, scores


def pick_system(systems: Sequence[str], name: Optional[str], path: str, option: str) -> str:
    if name not in systems:
        raise FigureInputError(f"{option} {name!r}: {path} has the systems {', '.join(systems)}")
    return name


def argmax_rows(path: str) -> List[Dict]:
    try:
        text = command.read_text(path)
    except command.CommandError as e:
        raise FigureInputError(f"{e} (posmix-attention's argmax_distance.csv)") from None
    rows = list(csv.DictReader(io.StringIO(text)))
    need = {"sublayer", "layer", "head", "mean_argmax_distance"}
    if not rows or not need <= set(rows[0]):
        raise FigureInputError(f"{path}: expected posmix-attention's argmax_distance.csv "
                               f"(columns {', '.join(sorted(need))})")
    for r in rows:
        r["layer"], r["head"] = int(r["layer"]), int(r["head"])
        for k in ("tokens",):
            if k in r:
                r[k] = int(r[k])
        for k in ("mean_argmax_distance", "mean_abs_distance", "off_diagonal_share"):
            if k in r:
                r[k] = float(r[k])
    return rows


def contrastive_by_distance(path: str, category: str) -> List[Tuple[str, int, int]]:
    """[(distance bin, correct, total)] of one error category of a ``posmix-contrastive --json`` file."""
    data = read_json(path, "posmix-contrastive --json output")
    by_distance = data.get("by_distance", {}) if isinstance(data, dict) else {}
    if category not in by_distance:
        raise FigureInputError(f"{path}: no accuracy by distance for {category!r} (it has "
                               f"{', '.join(by_distance) or 'none'}); pass --category with one of these")
    return [(b, int(v["correct"]), int(v["total"])) for b, v in by_distance[category].items()]


def partial_note(table: str, values: Dict[str, float]) -> str:
    """'' when ``values`` has every system of the ``posmix-reproduce`` table, else a sentence for the
    figure's note naming how many there are and which are missing."""
    labels = [s.label for s in TABLES[table].systems]
    missing = [label for label in labels if label not in values]
    if not missing:
        return ""
    return (f" Partial grid: ours has {len(labels) - len(missing)} of the {len(labels)} systems of {table} "
            f"(missing: {'; '.join(missing)}).")


def table_scores(table: str, scores_dir: Optional[str], pairs: Sequence[Tuple[str, str]], metric: str,
                 option: str = "--score") -> Dict[str, float]:
    """{system label: ``metric``} for the systems of a ``posmix-reproduce`` table: from ``scores_dir``
    (``posmix-reproduce --out OUT`` writes OUT/<table>/scores.<system>.json) and/or LABEL=PATH pairs
    (labels as the table names its systems; ``posmix-reproduce --list``)."""
    labels = [s.label for s in TABLES[table].systems]
    values: Dict[str, float] = {}
    if scores_dir:
        if not os.path.isdir(scores_dir):
            raise FigureInputError(f"--scores-dir {scores_dir}: no such directory (posmix-reproduce --out OUT "
                                   f"writes OUT/{table}/scores.<system>.json)")
        for label in labels:
            path = os.path.join(scores_dir, f"scores.{slug(label)}.json")
            if os.path.isfile(path):
                values[label] = metric_of(system_scores(path), metric, path)
    for label, path in pairs:
        if label not in labels:
            raise FigureInputError(f"{option} {label}={path}: {label!r} is not a system of {table}; its systems are: "
                                   f"{'; '.join(labels)}")
        values[label] = metric_of(system_scores(path, label), metric, path)
    if not values:
        raise FigureInputError(f"no scores of any {table} system: pass --scores-dir (posmix-reproduce's "
                               f"OUT/{table}) or {option} LABEL=PATH")
    return values
