"""Pure PyTorch code: no Django imports here, so it runs in notebooks and on bare GPU hosts.

Captioning core: ``config`` (dataclass configs, ``--set`` overrides), ``presets``, ``vocab``,
``data`` (items, collate, bucketing sampler), ``models/`` (one module per captioner, common
interface in ``models/base.py``), ``catalog`` (name -> config class) and ``registry`` (name ->
model and config classes), ``decoding`` (greedy and beam search), ``infer`` (captioning clips),
``trainer`` (``train(...)``, with ``train_state`` and ``runtime``), ``scst``, ``checkpoint``.
Features and pretrained encoders live in ``features``, ``video``, ``encoders/``. Offline
training data comes from the top-level ``synthscenes`` package (a data generator, not a model).

The settings modules import no torch, so a run can be planned where torch is not loaded (the
web process): ``config``, ``config_av``, ``config_features``, ``config_video``,
``config_encoders`` (each the settings of the module that computes with them), ``catalog``
and ``presets``.
"""
