"""The kinds of released files ``modeling.ml.released`` converts, without torch: the API and
the command list them in the web process."""

from __future__ import annotations

RELEASED_KINDS: dict[str, str] = {
    "panns_cnn14": "PANNs CNN14 (.pth as PANNs' main.py writes it)",
    "panns_resnet38": "PANNs ResNet38 (.pth as PANNs' main.py writes it)",
    "act_encoder": "ACT's AudioSet-pretrained encoder (audioset_deit.pth)",
    "act": "an ACT checkpoint (ACT_s/m/l) + its words_list.p",
    "vact_concat": "a V-ACT audio_visual checkpoint + its words_list.p",
    "maac": "a MAAC captioner state dict (<epoch>.pt) + words_list.p + TaggingToEmbs.p",
}
# the kinds whose file comes with the released word list (and MAAC's keyword-to-word list)
NEEDS_WORDS = frozenset({"act", "vact_concat", "maac"})
NEEDS_KEYWORD_WORDS = frozenset({"maac"})
