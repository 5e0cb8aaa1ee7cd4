"""Pure PyTorch code: no Django imports here, so it runs in notebooks and on bare GPU hosts.

Captioning core: ``config`` (dataclass configs, presets, ``--set`` overrides), ``vocab``,
``data`` (items, collate, bucketing sampler), ``models/`` (one module per captioner, common
interface in ``models/base.py``), ``registry`` (name -> model and config classes),
``decoding`` (greedy and beam search), ``trainer`` (``train(...)``), ``checkpoint``.
Features and pretrained encoders live in ``features``, ``encoders``; offline data in
``synthscenes``.
"""
