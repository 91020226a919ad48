"""How a sublayer mixes its values: one strategy class per path, chosen when the model is built."""
