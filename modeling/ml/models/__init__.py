"""One module per captioner; ``modeling.ml.registry`` maps names to them."""
