"""The capstone: the learner's own components from exercises 1–5, checked one by one against `addnorm`, assembled
into an encoder–decoder, trained beside the reference, and the components to blame named.

    python -m addnorm_grading.capstone --notebooks DIR        (make capstone [NOTEBOOKS=DIR])

DIR holds <assignment>/<notebook>.ipynb, as nbgrader's fetch lays them out. The notebooks are only read
(`notebooks`); the learner's code runs in a fresh kernel (`kernel`), where `workbench` loads it (`learner`), checks
each component alone with the reference standing in for the learner's other pieces (`components`, on weights
matched by `matching`), builds and trains the whole model (`assembly`, `training`) and bisects a gap (`blame`).
The process that reports (`report`, `__main__`) never runs learner code.
"""

# The components, in exercise order, named as the exercises name them; where each one lives.
COMPONENTS = {
    "AddNorm": "01_residual",
    "LayerNorm": "02_layer_norm",
    "EncoderLayer": "03_encoder_stack",
    "Encoder": "03_encoder_stack",
    "causal_mask": "04_decoder_stack",
    "DecoderLayer": "04_decoder_stack",
    "Decoder": "04_decoder_stack",
    "sinusoidal_encoding": "05_positional_encoding",
    "Embedding": "05_positional_encoding",
}
ASSEMBLED = [name for name in COMPONENTS if name != "AddNorm"]   # AddNorm is checked, not assembled: 3 and 4 inline it
