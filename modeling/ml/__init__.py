"""Pure PyTorch code: no Django imports here, so it runs in notebooks and on bare GPU hosts."""
