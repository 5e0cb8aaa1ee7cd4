from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from modeling.ml import encoders as E
from modeling.ml.encoders import EncoderConfig, build_encoder

# tiny versions of every architecture: same parameter names, small shapes
TINY: dict[str, dict[str, Any]] = {
    "vggish": {"channels": [4, 4, 8, 8, 8, 8], "hidden": 16, "embedding_dim": 8},
    "cnn14": {"widths": [4, 8, 8, 8, 8, 16], "embedding_dim": 16, "classes": 5},
    "resnet38": {
        "widths": [4, 8, 8, 8, 8, 16],
        "resnet_layers": [1, 1, 2, 1],
        "embedding_dim": 16,
        "classes": 5,
    },
    "ast": {
        "max_frames": 64,
        "fstride": 16,
        "tstride": 16,
        "dim": 16,
        "depth": 1,
        "heads": 2,
        "classes": 5,
    },
    "yamnet": {"width": 0.0625, "classes": 5},
    "cnn": {"channels": [4, 8], "d_model": 12},
}
MELS = {"vggish": 64, "cnn14": 64, "resnet38": 64, "ast": 32, "yamnet": 64, "cnn": 64}


def tiny(name: str, **extra: Any) -> nn.Module:
    config = E.arch_config(name, {**TINY[name], **extra}, MELS[name])
    return E.ENCODERS[name][0](config).eval()


def save(module: nn.Module, path: Path, **wrap: Any) -> Path:
    torch.save(module.state_dict(), path)
    return path


@pytest.mark.parametrize(
    ("name", "frames", "lengths", "steps", "dim"),
    [
        ("vggish", 200, [200, 150], [2, 1], 8),
        ("cnn14", 96, [96, 70], [3, 2], 16),
        ("resnet38", 96, [96, 70], [3, 2], 16),
        ("ast", 64, [64, 40], [4, 2], 16),
        ("yamnet", 200, [200, 150], [3, 2], 2 * 32),
        ("cnn", 40, [40, 21], [10, 5], 12),
    ],
)
def test_every_encoder_has_the_same_interface(
    name: str, frames: int, lengths: list[int], steps: list[int], dim: int
) -> None:
    encoder = tiny(name)
    out, out_lengths = encoder(torch.randn(2, frames, MELS[name]), torch.tensor(lengths))
    assert out.shape == (2, max(steps), dim)
    assert out_lengths.tolist() == steps
    assert encoder.output_dim == dim


def test_vggish_and_cnn14_have_their_published_sizes() -> None:
    with torch.device("meta"):
        vggish, cnn14 = E.VGGish(), E.Cnn14()
    assert E.count_parameters(vggish) == 72_141_184
    assert E.count_parameters(cnn14) == 80_753_615


def test_vggish_gives_mid_and_high_level_features() -> None:
    x, lengths = torch.randn(1, 192, 64), torch.tensor([192])
    fc2, _ = tiny("vggish", output="fc2")(x, lengths)
    conv4, conv4_lengths = tiny("vggish", output="conv4")(x, lengths)
    assert fc2.shape == (1, 2, 16)
    assert conv4.shape == (1, 12, 8)  # 6 steps of 0.16 s per 0.96 s patch
    assert conv4_lengths.tolist() == [12]


def _hooked_outputs(modules: dict[str, nn.Module]) -> dict[str, torch.Tensor]:
    """Records each named module's output on every forward call (the last one kept)."""
    seen: dict[str, torch.Tensor] = {}
    for key, module in modules.items():
        module.register_forward_hook(
            lambda _m, _args, out, key=key: seen.__setitem__(key, out.detach().clone())
        )
    return seen


def test_resnet38_pools_the_3rd_4th_and_last_of_its_six_blocks() -> None:
    # distinct widths, so every level's channel count names the block it came from:
    # conv_block1 4, layer1 4, layer2 6, layer3 10, layer4 12, (unused 14), conv_block_after1 18
    encoder = tiny("resnet38", widths=[4, 6, 10, 12, 14, 18], resnet_layers=[1, 1, 1, 1])
    assert isinstance(encoder, E.ResNet38)
    seen = _hooked_outputs(
        {
            "layer2": encoder.resnet.get_submodule("layer2"),
            "layer3": encoder.resnet.get_submodule("layer3"),
            "last": encoder.conv_block_after1,
        }
    )

    blocks = encoder.forward_blocks(torch.randn(2, 96, 64), torch.tensor([96, 64]))

    assert [x.shape[2] for x, _ in blocks] == [6, 10, 18] == list(encoder.level_dims)
    for (x, _), key in zip(blocks, ("layer2", "layer3", "last"), strict=True):
        # the level is that block's output averaged over frequency, frames first
        torch.testing.assert_close(x, seen[key].mean(dim=3).transpose(1, 2))
    assert [x.shape[1] for x, _ in blocks] == [24, 12, 3]  # time / 4, / 8, / 32
    assert blocks[0][1].tolist() == [24, 16]


def test_resnet38_levels_have_the_papers_channels_at_full_size() -> None:
    with torch.device("meta"):
        encoder = E.ResNet38()
    assert encoder.level_dims == (128, 256, 2048)


def test_ast_cls_output_gives_one_vector_per_overlapping_window() -> None:
    encoder = tiny("ast", output="cls")
    out, lengths = encoder(torch.randn(2, 160, 32), torch.tensor([160, 64]))
    assert out.shape == (2, 4, 16)  # windows of 64 frames every 32
    assert lengths.tolist() == [4, 1]


@pytest.mark.parametrize("name", sorted(TINY))
def test_weights_load_through_the_config(name: str, tmp_path: Path) -> None:
    source = tiny(name)
    path = save(source, tmp_path / f"{name}.pt")
    encoder = build_encoder(
        EncoderConfig(name=name, weights=str(path), n_mels=MELS[name], options=TINY[name])
    )
    x = torch.randn(2, 200 if name in ("vggish", "yamnet") else 64, MELS[name])
    lengths = torch.tensor([x.shape[1], x.shape[1]])
    torch.testing.assert_close(encoder(x, lengths)[0], source(x, lengths)[0])


def test_pretrained_encoders_stay_frozen(tmp_path: Path) -> None:
    path = save(tiny("cnn14"), tmp_path / "cnn14.pt")
    config = EncoderConfig(name="cnn14", weights=str(path), options=TINY["cnn14"])
    encoder = build_encoder(config).train()
    assert isinstance(encoder, E.FrozenEncoder)
    assert not encoder.encoder.training
    assert all(not p.requires_grad for p in encoder.parameters())
    unfrozen = build_encoder(EncoderConfig(**{**config.__dict__, "freeze": False}))
    assert all(p.requires_grad for p in unfrozen.parameters())


def test_a_panns_checkpoint_loads_without_its_front_end(tmp_path: Path) -> None:
    state = {f"module.{k}": v for k, v in tiny("cnn14").state_dict().items()}
    state["module.spectrogram_extractor.stft.conv_real.weight"] = torch.zeros(513, 1, 1024)
    state["module.logmel_extractor.melW"] = torch.zeros(513, 64)
    torch.save({"model": state, "iteration": 3}, tmp_path / "Cnn14.pth")
    config = EncoderConfig(name="cnn14", weights=str(tmp_path / "Cnn14.pth"), options=TINY["cnn14"])
    assert isinstance(build_encoder(config), E.FrozenEncoder)


def test_a_mismatched_file_is_refused_with_the_reasons(tmp_path: Path) -> None:
    path = save(tiny("vggish", hidden=32), tmp_path / "vggish.pt")
    config = EncoderConfig(name="vggish", weights=str(path), options=TINY["vggish"])
    with pytest.raises(ValueError, match=r"vggish\.pt does not fit encoder 'vggish'") as exc:
        build_encoder(config)
    assert "5 wrong shape: embeddings.0.weight: file (32, 192) vs model (16, 192)" in str(exc.value)


def test_another_architectures_file_is_refused(tmp_path: Path) -> None:
    path = save(tiny("yamnet"), tmp_path / "yamnet.pt")
    config = EncoderConfig(name="cnn14", weights=str(path), options=TINY["cnn14"])
    with pytest.raises(ValueError, match=r"missing: .*unexpected: ") as exc:
        build_encoder(config)
    assert "more)" in str(exc.value)


def test_a_missing_or_foreign_weights_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.pt does not exist"):
        build_encoder(EncoderConfig(name="cnn14", weights=str(tmp_path / "nope.pt")))
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(ValueError, match=r"text\.pt: not a PyTorch weights file"):
        build_encoder(EncoderConfig(name="cnn14", weights=str(tmp_path / "text.pt")))


def test_without_weights_the_small_cnn_stands_in_with_the_same_size() -> None:
    encoder = build_encoder(EncoderConfig(name="vggish"))
    assert isinstance(encoder, E.ConvEncoder)
    assert encoder.output_dim == 128 == E.encoder_output_dim(EncoderConfig(name="vggish"))
    assert E.encoder_output_dim(EncoderConfig(name="ast", weights="x.pt")) == 768
    out, lengths = encoder(torch.randn(2, 40, 64), torch.tensor([40, 20]))
    assert out.shape == (2, 10, 128)
    assert lengths.tolist() == [10, 5]
    assert any(p.requires_grad for p in encoder.parameters())


def test_unknown_names_and_options_list_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known encoders: ast, cnn, cnn14, resnet38, vggish"):
        build_encoder(EncoderConfig(name="wav2vec", weights="w.pt"))
    with pytest.raises(ValueError, match=r"no option\(s\) \['depth'\]"):
        build_encoder(EncoderConfig(name="cnn", options={"depth": 3}))


def test_the_small_cnn_is_padding_invariant() -> None:
    torch.manual_seed(0)
    encoder = tiny("cnn")
    a, b = torch.randn(1, 37, 64), torch.randn(1, 64, 64)
    batch = torch.zeros(2, 64, 64)
    batch[0, :37], batch[1] = a[0], b[0]
    out, lengths = encoder(batch, torch.tensor([37, 64]))
    alone_a, _ = encoder(a, torch.tensor([37]))
    alone_b, _ = encoder(b, torch.tensor([64]))
    torch.testing.assert_close(out[0, : lengths[0]], alone_a[0])
    torch.testing.assert_close(out[1], alone_b[0])
    assert out[0, lengths[0] :].abs().sum() == 0


def test_the_small_cnn_learns() -> None:
    torch.manual_seed(0)
    encoder = tiny("cnn").train()
    x, lengths = torch.randn(4, 32, 64), torch.tensor([32, 32, 20, 16])
    target = torch.randn(4, 12)
    optimiser = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        out, out_lengths = encoder(x, lengths)
        pooled = out.sum(dim=1) / out_lengths[:, None]
        loss = torch.nn.functional.mse_loss(pooled, target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_encoders_check_their_input() -> None:
    with pytest.raises(ValueError, match="expects 64 feature bins, got 32"):
        tiny("cnn14")(torch.randn(1, 64, 32), torch.tensor([64]))
    with pytest.raises(ValueError, match="needs at least 32 frames"):
        tiny("cnn14")(torch.randn(1, 20, 64), torch.tensor([20]))
