"""Video features: ffmpeg frame sampling, torchvision encoders from local weights files, the
pixel frames and trainable frame CNN, and the content-addressed cache."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from modeling.ml.data import collate
from modeling.ml.models.av import AVCaptioner
from modeling.ml.models.base import caption_loss
from modeling.ml.models.vact import VACTCaptioner
from modeling.ml.video import (
    FrameCNN,
    PretrainedVideoEncoder,
    VideoConfig,
    VideoFeatureCache,
    encode_frames,
    pixel_features,
    read_frames,
    video_encoder,
)
from tests.modeling.captioning import items, one_torch_thread, vocabulary  # noqa: F401
from tests.modeling.captioning_av import tiny_av_model


def _video(path: Path, source: str, seconds: float = 2.0) -> Path:
    subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", source),
            *("-t", str(seconds), "-pix_fmt", "yuv420p", str(path)),
        ],
        check=True,
    )
    return path


@pytest.fixture
def test_pattern(tmp_path: Path) -> Path:
    return _video(tmp_path / "pattern.mp4", "testsrc=size=64x48:rate=10")


@pytest.fixture
def red(tmp_path: Path) -> Path:
    return _video(tmp_path / "red.mp4", "color=c=red:size=40x30:rate=10")


def test_frames_are_sampled_at_the_asked_rate_and_size(test_pattern: Path):
    frames = read_frames(test_pattern, VideoConfig(fps=2, size=16))
    assert frames.shape == (4, 16, 16, 3)
    assert frames.dtype == np.uint8
    assert frames.flags.writeable


def test_frames_keep_their_colour(red: Path):
    frames = read_frames(red, VideoConfig(fps=1, size=8)).astype(int)
    assert np.abs(frames - [254, 0, 0]).max() < 12


def test_long_videos_are_sampled_evenly_down_to_max_frames(test_pattern: Path):
    every = read_frames(test_pattern, VideoConfig(fps=10, size=8))
    few = read_frames(test_pattern, VideoConfig(fps=10, size=8, max_frames=5))
    assert every.shape[0] == 20
    assert few.shape[0] == 5
    np.testing.assert_array_equal(few[0], every[0])
    np.testing.assert_array_equal(few[-1], every[-1])


def test_a_file_that_is_not_a_video_is_named(tmp_path: Path):
    bad = tmp_path / "notes.mp4"
    bad.write_text("not a video")
    with pytest.raises(ValueError, match=r"notes\.mp4: cannot decode video"):
        read_frames(bad, VideoConfig())


@pytest.mark.parametrize(
    ("name", "playlist", "kind"),
    [
        ("clip.mp4", "ffconcat version 1.0\nfile secret.mp4\n", "concat"),
        (
            "clip.webm",
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nsecret.mp4\n#EXT-X-ENDLIST\n",
            "hls",
        ),
    ],
    ids=["concat", "hls"],
)
def test_a_playlist_cannot_make_ffmpeg_read_another_file(
    tmp_path: Path, name: str, playlist: str, kind: str
):
    # Without the format whitelist ffmpeg follows the playlist and decodes secret.mp4.
    _video(tmp_path / "secret.mp4", "testsrc=size=64x48:rate=10")
    crafted = tmp_path / name
    crafted.write_text(playlist)
    with pytest.raises(
        ValueError, match=rf"{re.escape(name)}: cannot decode video \(a {kind} file"
    ):
        read_frames(crafted, VideoConfig(fps=2, size=8))


@pytest.mark.parametrize(
    ("name", "codec"), [("clip.mp4", "libx264"), ("clip.webm", "libvpx"), ("clip.mkv", "mpeg4")]
)
def test_videos_in_the_containers_clips_come_in_still_decode(tmp_path: Path, name: str, codec: str):
    video = tmp_path / name
    subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10"),
            *("-t", "2", "-c:v", codec, "-pix_fmt", "yuv420p", str(video)),
        ],
        check=True,
    )
    assert read_frames(video, VideoConfig(fps=2, size=8)).shape == (4, 8, 8, 3)


def test_pixel_features_are_channel_first_frames_in_0_1():
    frames = np.zeros((2, 8, 8, 3), np.uint8)
    frames[1, :, :, 2] = 255  # second frame blue
    features = pixel_features(frames)
    assert features.shape == (2, 3 * 8 * 8)
    assert features[0].abs().sum() == 0
    assert features[1].reshape(3, 8, 8)[2].min() == 1.0
    assert features[1].reshape(3, 8, 8)[:2].abs().sum() == 0


def test_a_bad_video_config_names_the_problem():
    with pytest.raises(ValueError, match="encoder 'vgg' is not one of"):
        VideoConfig(encoder="vgg")
    with pytest.raises(ValueError, match="fps must be > 0"):
        VideoConfig(fps=0)


@pytest.mark.parametrize(
    ("encoder", "frames", "rows", "dim"),
    [("resnet18", 5, 5, 512), ("s3d", 10, 2, 1024), ("swin3d_t", 9, 2, 768)],
)
def test_pretrained_encoders_give_one_feature_per_frame_or_chunk(encoder, frames, rows, dim):
    config = VideoConfig(encoder=encoder, size=32, chunk_frames=8, device="cpu")
    video = np.random.default_rng(0).integers(0, 255, (frames, 32, 32, 3), dtype=np.uint8)
    features = encode_frames(video, config, video_encoder(config))
    assert features.shape == (rows, dim)
    assert config.feature_dim == dim


def test_weights_load_from_a_local_file(tmp_path: Path):
    from torchvision.models import resnet18

    torch.manual_seed(5)
    reference = resnet18(weights=None).eval()
    torch.save(reference.state_dict(), tmp_path / "resnet18.pth")
    config = VideoConfig(encoder="resnet18", weights=str(tmp_path / "resnet18.pth"), size=32)
    encoder = PretrainedVideoEncoder(config)
    frames = torch.randint(0, 255, (3, 32, 32, 3), dtype=torch.uint8)
    x = frames.permute(0, 3, 1, 2).float() / 255.0
    x = (x - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / torch.tensor(
        [0.229, 0.224, 0.225]
    ).view(1, 3, 1, 1)
    reference.fc = torch.nn.Identity()
    with torch.no_grad():
        expected = reference(x)
    torch.testing.assert_close(encoder(frames), expected)


def test_a_weights_file_of_another_model_is_refused_naming_it(tmp_path: Path):
    torch.save({"conv.weight": torch.zeros(1)}, tmp_path / "other.pth")
    config = VideoConfig(encoder="resnet18", weights=str(tmp_path / "other.pth"))
    with pytest.raises(ValueError, match=r"resnet18: .*other\.pth does not fit"):
        PretrainedVideoEncoder(config)
    with pytest.raises(ValueError, match=r"no weights file at /nowhere\.pth"):
        VideoFeatureCache(tmp_path, VideoConfig(encoder="s3d", weights="/nowhere.pth"))


def test_the_cache_stores_pixel_frames_exactly_and_serves_them_again(
    tmp_path: Path, test_pattern: Path
):
    config = VideoConfig(fps=2, size=16)
    cache = VideoFeatureCache(tmp_path / "cache", config)
    first = cache.get_or_compute(test_pattern)
    again = VideoFeatureCache(tmp_path / "cache", config).get_or_compute(test_pattern)
    assert (cache.hits, cache.misses) == (0, 1)
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    torch.testing.assert_close(first, pixel_features(read_frames(test_pattern, config)))
    stored = next((tmp_path / "cache").glob("video-*/*/*.npy"))
    assert np.load(stored).dtype == np.uint8


def test_the_cache_key_follows_what_changes_the_features(tmp_path: Path):
    base = VideoConfig()
    assert base.key() != VideoConfig(fps=4).key()
    assert base.key() != VideoConfig(size=64).key()
    assert base.key() == VideoConfig(batch_size=4, device="cpu").key()
    assert base.key("a" * 64) != base.key("b" * 64)  # another weights file


def test_frame_cnn_encodes_real_frames_only():
    cnn = FrameCNN(8, 6).eval()
    pixels = torch.rand(2, 3, 3 * 8 * 8)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    out = cnn(pixels, mask)
    assert out.shape == (2, 3, 6)
    assert out[~mask].abs().sum() == 0
    alone = cnn(pixels[:1, :2])
    torch.testing.assert_close(out[0, :2], alone[0])


@pytest.mark.parametrize("name", ["vact", "crossmodal"])
def test_models_learn_from_raw_frames_through_their_frame_cnn(name):
    vocab = vocabulary()
    model = tiny_av_model(name, vocab, video_frame_size=8, video_dim=6, dropout=0.0)
    gen = torch.Generator().manual_seed(0)
    examples = [
        item.__class__(**{**item.__dict__, "video": torch.rand(3, 3 * 8 * 8, generator=gen)})
        for item in items(vocab)[:4]
    ]
    batch = collate(examples)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        loss = caption_loss(model(batch), batch["tokens"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    if name == "vact":
        assert isinstance(model, VACTCaptioner)
        cnn = model.video_encoder.frames
    else:
        assert isinstance(model, AVCaptioner)
        cnn = model.video_frames
    assert cnn is not None
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in cnn.parameters())
