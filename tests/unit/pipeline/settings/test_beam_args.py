"""Beam dependency flags: without one, every TFX Beam executor sdists the whole TFX install into /tmp."""

import pytest
from tfx.utils import dependency_utils

from torchtfx.data.config.dataset import load_dataset_config
from torchtfx.pipeline.local.runner import LocalSettings
from torchtfx.pipeline.settings.beam_args import SMALL_INPUT_BYTES, with_dependency


def test_local_args_carry_the_project_setup_file_so_tfx_builds_no_ephemeral_package(tmp_path):
    args = LocalSettings(dataset=load_dataset_config("taxi"), pipeline_root=tmp_path).beam_args()
    assert any(a.startswith("--setup_file=") and a.endswith("setup.py") for a in args)
    # TFX's own check: args it returns unchanged mean no tfx_ephemeral sdist was built.
    assert dependency_utils.make_beam_dependency_flags(args) == args


def test_user_dependency_flag_is_kept_and_no_second_one_added():
    user = ["--runner=DataflowRunner", "--sdk_container_image", "example.com/img:1"]
    assert with_dependency(user, "--setup_file=/x/setup.py") == user
    assert with_dependency(["--requirements_file=r.txt"], "--setup_file=/x") == ["--requirements_file=r.txt"]


def test_missing_flag_is_appended():
    assert with_dependency(["--runner=DirectRunner"], "--sdk_container_image=img:1") == [
        "--runner=DirectRunner",
        "--sdk_container_image=img:1",
    ]


def test_a_flag_that_is_not_a_dependency_flag_is_refused():
    with pytest.raises(ValueError, match="not a Beam dependency flag"):
        with_dependency([], "--temp_location=gs://x")


def _settings(tmp_path, csv_bytes: int, mode: str = "auto") -> LocalSettings:
    data = tmp_path / "data"
    data.mkdir()
    (data / "part.csv").write_text("a,b\n" + "1,2\n" * (csv_bytes // 4))
    return LocalSettings(
        dataset=load_dataset_config("taxi"), pipeline_root=tmp_path / "root", data_dir=data, beam_mode=mode
    )


def test_auto_mode_runs_small_inputs_in_process(tmp_path):
    args = _settings(tmp_path, 1000).beam_args()
    assert "--direct_running_mode=in_memory" in args and "--direct_num_workers=1" in args


def test_auto_mode_uses_worker_processes_for_large_inputs(tmp_path):
    args = _settings(tmp_path, SMALL_INPUT_BYTES + 4096).beam_args()
    assert "--direct_running_mode=multi_processing" in args and "--direct_num_workers=2" in args


def test_explicit_mode_wins_over_input_size(tmp_path):
    assert "--direct_running_mode=multi_processing" in _settings(tmp_path, 10, "multi_processing").beam_args()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("beam_mode", "in-memory", "beam_mode 'in-memory' is not one of auto, in_memory, multi_processing"),
        ("beam_workers", 0, "beam_workers: must be a whole number from 1 to 1,024, got 0"),
    ],
)
def test_bad_beam_settings_are_refused_by_name(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        LocalSettings(dataset=load_dataset_config("taxi"), pipeline_root=tmp_path, **{field: value})
