"""The ground floor shared by the token mixers and the position encodings, which both build on it and
never import each other (docs/contributing.md, Layout)."""
