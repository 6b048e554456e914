"""`fuzz run` settings are checked before any worker starts or anything is written (issue 17 item 5:
``--timeout -1``, ``--max-models -3`` and a single backend used to run and exit 0)."""

from __future__ import annotations

import pytest

from twinspect.dl.fuzz.campaign import Config, run_campaign
from twinspect.errors import InputError


@pytest.mark.parametrize("config, needle", [
    (Config(timeout_s=-1), "timeout"),
    (Config(timeout_s=0), "timeout"),
    (Config(backends=["tensorflow"]), "two distinct backends"),
    (Config(backends=["tensorflow", "keras-tensorflow"]), "two distinct backends"),
    (Config(backends=["tensorflw", "jax"]), "unknown backend"),
    (Config(seeds=[]), "no seed model"),
    (Config(variant="nnsmith"), "unknown variant"),
    (Config(seeds=["LeNet5", "VGG16"]), "unknown seed model 'VGG16'"),
    (Config(mh_p=1.5), "(0, 1)"),
    (Config(minimise_tries=-1), "minimise_tries"),
])
def test_bad_config_is_refused_before_anything_is_written(tmp_path, config, needle):
    out = tmp_path / "camp"
    with pytest.raises(InputError, match=None) as info:
        run_campaign(out, 10.0, config)
    assert needle in str(info.value)
    assert not out.exists()


@pytest.mark.parametrize("max_models, budget", [(-3, 10.0), (0, 10.0), (None, 0.0), (None, -5.0)])
def test_bad_run_limits_are_refused(tmp_path, max_models, budget):
    out = tmp_path / "camp"
    with pytest.raises(InputError):
        run_campaign(out, budget, Config(), max_models=max_models)
    assert not out.exists()


def test_output_that_is_a_file_is_refused_and_kept(tmp_path):
    out = tmp_path / "existing"
    out.write_text("keep me")
    with pytest.raises(InputError, match="not a directory"):
        run_campaign(out, 10.0, Config())
    assert out.read_text() == "keep me"


def test_default_config_is_valid():
    assert len(Config().validate()) == 4


def test_unwritable_campaign_directory_is_refused_up_front(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="campaign directory"):
        run_campaign(blocker / "camp", 10.0, Config())


def test_foreign_non_empty_directory_is_refused_and_kept(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="holds no campaign"):
        run_campaign(tmp_path, 10.0, Config())
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_seed_list_expands_all_and_small_in_order_without_repeats():
    from twinspect.dl.fuzz import seeds

    assert seeds.parse_names("all") == list(seeds.ALL_SEEDS)
    assert len(seeds.ALL_SEEDS) == 10
    assert seeds.parse_names(" Xception , small,LeNet5") == ["Xception", "LeNet5", "AlexNet", "LSTM1", "LSTM2"]
    with pytest.raises(InputError, match="unknown seed model 'VGG16'"):
        seeds.parse_names("small,VGG16")
    with pytest.raises(InputError, match="no seed model"):
        seeds.parse_names(" , ")


def test_cli_refuses_a_bad_seed_name_after_all_with_one_line_and_exit_2(tmp_path, capsys):
    from tests.cli_run import run

    out = tmp_path / "camp"
    code, _, err = run(capsys, "fuzz", "run", "-o", out, "--budget", "1s", "--seeds", "all,VGG16")
    assert code == 2 and "unknown seed model 'VGG16'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
