from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import torchaudio

from modeling.ml import features as F
from modeling.ml.features import ACT, FeatureCache, FeatureConfig, SpecAugment, extract


def tone(seconds: float = 1.0, sr: int = 32_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    wave = 0.5 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)
    return wave.astype(np.float32)


def write(path: Path, samples: np.ndarray, sr: int = 32_000) -> Path:
    sf.write(str(path), samples, sr, subtype="FLOAT")
    return path


# extraction ------------------------------------------------------------------------------


def test_it_matches_torchaudio_log_mel() -> None:
    wave = torch.from_numpy(tone())
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=32_000, n_fft=1024, win_length=1024, hop_length=640, n_mels=64
    )(wave)
    expected = torch.log(mel + 1e-6).T
    got = extract(wave, 32_000, ACT)
    assert got.shape == (1 + 32_000 // 640, 64) == expected.shape
    torch.testing.assert_close(got, expected)


def test_it_matches_torchaudio_mfcc() -> None:
    config = F.AUDIOCAPS_MFCC
    wave = torch.from_numpy(tone(sr=16_000))
    mfcc = torchaudio.transforms.MFCC(
        sample_rate=16_000,
        n_mfcc=20,
        log_mels=True,
        melkwargs={"n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 64},
    )(wave)
    got = extract(wave, 16_000, config)
    assert got.shape == (101, 20)
    torch.testing.assert_close(got, mfcc.T, rtol=1e-4, atol=1e-4)


def test_it_matches_kaldi_fbank_for_ast() -> None:
    wave = torch.from_numpy(tone(sr=16_000))
    expected = torchaudio.compliance.kaldi.fbank(
        wave[None],
        htk_compat=True,
        sample_frequency=16_000,
        use_energy=False,
        window_type="hanning",
        num_mel_bins=128,
        dither=0.0,
        frame_shift=10,
    )
    got = extract(wave, 16_000, F.AST)
    torch.testing.assert_close(got, expected)
    assert got.shape[0] == F.AST.num_frames(16_000)


def test_it_uses_db_and_slaney_mels_for_panns() -> None:
    wave = torch.from_numpy(tone())
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=32_000,
        n_fft=1024,
        hop_length=320,
        f_min=50,
        f_max=14_000,
        n_mels=64,
        norm="slaney",
        mel_scale="slaney",
    )(wave)
    expected = torchaudio.transforms.AmplitudeToDB(top_db=None)(mel).T
    torch.testing.assert_close(extract(wave, 32_000, F.PANNS), expected, rtol=1e-4, atol=1e-3)


def test_it_resamples_and_mixes_to_mono() -> None:
    left, right = tone(sr=44_100, seed=1), tone(sr=44_100, seed=2)
    stereo = torch.from_numpy(np.stack([left, right]))
    mono = torchaudio.functional.resample(stereo.mean(dim=0), 44_100, 32_000)
    torch.testing.assert_close(extract(stereo, 44_100, ACT), extract(mono, 32_000, ACT))


@pytest.mark.parametrize("name", sorted(F.PRESETS))
def test_every_preset_gives_the_frames_it_promises(name: str) -> None:
    config = F.PRESETS[name]
    samples = int(2.5 * config.sample_rate)
    got = extract(np.zeros(samples, dtype=np.float32) + 0.01, config.sample_rate, config)
    assert got.shape == (config.num_frames(samples), config.n_features)
    assert torch.isfinite(got).all()


def test_it_rejects_audio_shorter_than_a_window() -> None:
    with pytest.raises(ValueError, match="shorter than one 1024-sample window"):
        extract(np.zeros(100, dtype=np.float32), 32_000, ACT)


def test_it_rejects_integer_samples() -> None:
    with pytest.raises(ValueError, match="floating point"):
        extract(np.zeros(32_000, dtype=np.int16), 32_000, ACT)


# configs ---------------------------------------------------------------------------------


def test_the_key_is_stable_across_runs() -> None:
    # a changed value here means every cached feature is recomputed: bump on purpose only
    assert ACT.key() == "cb05149aa7a67107"
    assert FeatureConfig().key() == ACT.key()


def test_the_key_changes_with_any_field() -> None:
    keys = {ACT.key(), replace(ACT, hop_length=320).key(), replace(ACT, log_offset=1e-5).key()}
    keys |= {replace(ACT, kind="mfcc").key(), replace(ACT, f_max=8000.0).key()}
    assert len(keys) == 5


def test_a_bad_config_names_the_field() -> None:
    with pytest.raises(ValueError, match="kind 'spectrogram'"):
        FeatureConfig(kind="spectrogram")
    with pytest.raises(ValueError, match="win_length 2048 exceeds n_fft 1024"):
        FeatureConfig(win_length=2048)


def test_a_config_round_trips_through_a_dict() -> None:
    assert FeatureConfig.from_dict(F.AV.to_dict()) == F.AV
    with pytest.raises(ValueError, match="hop"):
        FeatureConfig.from_dict({"hop": 10})


def test_presets_are_looked_up_by_name() -> None:
    assert F.feature_preset("act") == ACT
    assert (F.AV.sample_rate, F.AV.n_fft, F.AV.hop_length, F.AV.n_mels) == (22_050, 1536, 588, 64)
    with pytest.raises(ValueError, match="known presets: act, act_code, ast, audiocaps_mfcc"):
        F.feature_preset("vgg")


# files -----------------------------------------------------------------------------------


def test_extract_files_matches_extract_per_clip(tmp_path: Path) -> None:
    paths = [
        write(tmp_path / "a.wav", tone(1.0, seed=1)),
        write(tmp_path / "b.wav", tone(1.5, 16_000, seed=2), 16_000),
        write(tmp_path / "c.wav", tone(1.0, seed=3)),
    ]
    got = F.extract_files(paths, ACT)
    for path, features in zip(paths, got, strict=True):
        samples, rate = sf.read(str(path), dtype="float32")
        torch.testing.assert_close(features, extract(samples, rate, ACT), rtol=1e-4, atol=1e-4)
    assert [f.shape[0] for f in got] == [51, 76, 51]


@pytest.mark.parametrize(("subtype", "channels"), [("PCM_16", 1), ("PCM_16", 2), ("FLOAT", 1)])
def test_decoding_gives_libsndfiles_float_samples(
    tmp_path: Path, subtype: str, channels: int
) -> None:
    # 16-bit mono is read as int16 and scaled by us; the result must be libsndfile's own
    samples = np.stack([tone(1.0, seed=4 + c) for c in range(channels)], axis=1)
    path = tmp_path / "clip.wav"
    sf.write(str(path), samples, 32_000, subtype=subtype)
    expected = sf.read(str(path), dtype="float32", always_2d=True)[0].mean(axis=1)
    decoded, rate = F.read_wav(path)
    assert rate == 32_000
    assert decoded.dtype == np.float32
    np.testing.assert_array_equal(decoded, expected)
    (features,) = F.extract_files([path], ACT)
    assert torch.equal(features, extract(expected, 32_000, ACT))


def test_a_broken_file_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"RIFF....not audio")
    with pytest.raises(ValueError, match=r"broken\.wav: cannot decode audio"):
        F.extract_files([broken], ACT)


def test_pad_batch_pads_and_counts() -> None:
    batch, lengths = F.pad_batch([torch.ones(3, 2), torch.ones(5, 2)])
    assert batch.shape == (2, 5, 2)
    assert lengths.tolist() == [3, 5]
    assert batch[0, 3:].abs().sum() == 0


# cache -----------------------------------------------------------------------------------


def test_the_cache_misses_then_hits(tmp_path: Path) -> None:
    wav = write(tmp_path / "clip.wav", tone())
    cache = FeatureCache(tmp_path / "cache", ACT)
    first = cache.get_or_compute(wav, "ab" * 32)
    wav.unlink()  # a hit must not need the audio
    second = cache.get_or_compute(wav, "ab" * 32)
    assert (cache.misses, cache.hits) == (1, 1)
    torch.testing.assert_close(first, second)
    assert cache.path_for("ab" * 32).is_file()


def test_the_cache_is_keyed_by_content_and_config(tmp_path: Path) -> None:
    wav = write(tmp_path / "clip.wav", tone())
    act = FeatureCache(tmp_path / "cache", ACT)
    act.get_or_compute(wav, "ab" * 32)
    act.get_or_compute(wav, "cd" * 32)
    other = FeatureCache(tmp_path / "cache", replace(ACT, n_mels=32))
    features = other.get_or_compute(wav, "ab" * 32)
    assert (act.misses, act.hits, other.misses) == (2, 0, 1)
    assert features.shape[1] == 32
    assert act.folder != other.folder
    assert (act.folder / "config.json").is_file()


def test_the_cache_hashes_the_file_when_no_hash_is_given(tmp_path: Path) -> None:
    wav = write(tmp_path / "clip.wav", tone())
    cache = FeatureCache(tmp_path / "cache", ACT)
    cache.get_or_compute(wav)
    assert cache.path_for(F.sha256_file(wav)).is_file()


def test_the_cache_rejects_a_bad_hash(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a lower-case hex sha256"):
        FeatureCache(tmp_path, ACT).path_for("../../etc/passwd")


def test_a_failed_write_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = FeatureCache(tmp_path / "cache", ACT)

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(F.np, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        cache.put("ab" * 32, torch.ones(4, 64))
    target = cache.path_for("ab" * 32)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_a_damaged_entry_is_recomputed(tmp_path: Path) -> None:
    wav = write(tmp_path / "clip.wav", tone())
    cache = FeatureCache(tmp_path / "cache", ACT)
    good = cache.get_or_compute(wav, "ab" * 32)
    cache.path_for("ab" * 32).write_bytes(b"\x93NUMPY truncated")
    again = cache.get_or_compute(wav, "ab" * 32)
    assert cache.misses == 2
    torch.testing.assert_close(again, good)
    torch.testing.assert_close(cache.get("ab" * 32), good)


def test_racing_writers_leave_one_whole_file(tmp_path: Path) -> None:
    cache = FeatureCache(tmp_path / "cache", ACT)
    value = torch.randn(500, 64)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(20):
                cache.put("ab" * 32, value)
                loaded = cache.get("ab" * 32)
                assert loaded is not None  # readers never see a partial file
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    torch.testing.assert_close(cache.get("ab" * 32), value)
    assert [p.name for p in cache.path_for("ab" * 32).parent.iterdir()] == [f"{'ab' * 32}.npy"]


def test_many_clips_mix_hits_and_misses(tmp_path: Path) -> None:
    paths = [write(tmp_path / f"{i}.wav", tone(seed=i)) for i in range(3)]
    cache = FeatureCache(tmp_path / "cache", ACT)
    single = cache.get_or_compute(paths[1])
    got = cache.get_or_compute_many([(p, None) for p in paths])
    assert (cache.misses, cache.hits) == (3, 1)
    torch.testing.assert_close(got[1], single)
    assert len(list(cache.folder.glob("*/*.npy"))) == 3


# SpecAugment -------------------------------------------------------------------------------


def test_spec_augment_does_nothing_in_eval_mode() -> None:
    augment = SpecAugment(time_mask=20, freq_mask=10, p=1.0).eval()
    x = torch.randn(4, 100, 64)
    assert augment(x) is x


def test_spec_augment_masks_in_training() -> None:
    torch.manual_seed(0)
    augment = SpecAugment(time_mask=20, freq_mask=10, p=1.0).train()
    x = torch.randn(4, 100, 64)
    y = augment(x)
    changed = y != x
    assert changed.any()
    assert (changed.sum(dim=(1, 2)) > 0).all()  # p=1: every clip is augmented
    for b in range(4):  # masked cells hold the clip's mean
        assert torch.allclose(y[b][changed[b]], x[b].mean().expand(int(changed[b].sum())))


def test_spec_augment_keeps_time_masks_inside_each_clip() -> None:
    torch.manual_seed(1)
    augment = SpecAugment(time_mask=30, freq_mask=0, n_time_masks=3, p=1.0)
    lengths = torch.tensor([100, 40, 10])
    for _ in range(20):
        mask = augment.mask(torch.zeros(3, 100, 8), lengths)
        frames = mask.any(dim=2)
        for b, length in enumerate(lengths.tolist()):
            assert not frames[b, length:].any()


def test_spec_augment_probability_zero_never_masks() -> None:
    augment = SpecAugment(time_mask=20, freq_mask=10, p=0.0).train()
    x = torch.randn(2, 50, 16)
    assert torch.equal(augment(x), x)


def test_spec_augment_probability_picks_about_that_share() -> None:
    torch.manual_seed(2)
    augment = SpecAugment(time_mask=10, freq_mask=5, p=0.4)
    mask = augment.mask(torch.zeros(2000, 50, 16))
    share = mask.flatten(1).any(dim=1).float().mean().item()
    assert 0.33 < share < 0.47


def test_spec_augment_rejects_a_bad_probability() -> None:
    with pytest.raises(ValueError, match=r"probability 1\.5"):
        SpecAugment(time_mask=1, freq_mask=1, p=1.5)


def test_extracted_features_can_feed_a_trained_model() -> None:
    # inference-mode tensors cannot be saved for backward; extract must not return them
    features = extract(torch.from_numpy(tone()), 32_000, ACT)
    conv = torch.nn.Conv1d(64, 4, 3)
    conv(features.T[None]).sum().backward()
    assert conv.weight.grad is not None


def test_the_act_code_front_end_floors_at_80_db_below_the_loudest_bin() -> None:
    wave = torch.from_numpy(tone())
    wave[: wave.numel() // 2] *= 1e-6  # a near-silent first half, far below the floor
    mel = torchaudio.transforms.MelSpectrogram(
        sample_rate=32_000, n_fft=1024, hop_length=640, n_mels=64, norm="slaney", mel_scale="slaney"
    )(wave)
    expected = torchaudio.transforms.AmplitudeToDB(top_db=80.0)(mel).T[:-1]  # last one dropped
    features = extract(wave, 32_000, F.feature_preset("act_code"))
    assert float(features.amax() - features.amin()) == pytest.approx(80.0, abs=1e-3)
    torch.testing.assert_close(features, expected, rtol=1e-4, atol=1e-3)


def test_a_floor_leaves_the_cache_keys_of_configs_without_one_alone() -> None:
    assert F.PANNS.key() == "5b4d843237a9855e"  # its key before top_db existed
    assert replace(F.PANNS, top_db=80.0).key() != F.PANNS.key()


def test_the_act_code_front_end_gives_500_frames_for_10_seconds() -> None:
    config = F.feature_preset("act_code")
    assert config.num_frames(320_000) == 500
    assert extract(torch.zeros(320_000), 32_000, config).shape == (500, 64)
