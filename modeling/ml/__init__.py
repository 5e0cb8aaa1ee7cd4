"""Pure PyTorch code: no Django imports here, so it runs in notebooks and on bare GPU hosts.

Captioning core: ``config`` (dataclass configs, ``--set`` overrides), ``presets``, ``vocab``,
``data`` (items, collate, bucketing sampler), ``models/`` (one module per captioner, common
interface in ``models/base.py``), ``registry`` (name -> model and config classes),
``decoding`` (greedy and beam search), ``infer`` (captioning clips), ``trainer``
(``train(...)``, with ``train_state`` and ``runtime``), ``scst``, ``checkpoint``.
Features and pretrained encoders live in ``features``, ``video``, ``encoders/``. Offline
training data comes from the top-level ``synthscenes`` package (a data generator, not a model).
"""
