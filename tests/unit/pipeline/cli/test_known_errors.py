"""Library failures the command line names with the stage, the cause and the fix: TFMA's signature failure and
TensorFlow's shape errors from a served graph, raised by real TensorFlow and passed through a real Beam pipeline
as the Evaluator's are; anything else still says it may be a bug."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from torchtfx.pipeline.cli.errors import UNEXPECTED_HINT, reports_errors
from torchtfx.pipeline.cli.known_errors import known_failure


def _batch_dependent_graph():
    """A graph whose slice width is computed from the batch (3 columns at an even batch, 4 at an odd one), as a
    mixture of experts computes its capacity from the routed tokens: it runs at batch 2 and fails at batch 1."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def served(x):
        width = tf.shape(x)[0] % 2 + 3
        return x[:, :width] + x[:, :3]

    served(tf.zeros([2, 8]))
    return served


def _tf_shape_error() -> Exception:
    import tensorflow as tf

    try:
        _batch_dependent_graph()(tf.zeros([1, 8]))
    except tf.errors.InvalidArgumentError as err:
        return err
    raise AssertionError("the graph ran at batch 1")


class _CallsTheSignature:
    """What tensorflow_model_analysis/utils/model_util.py does (0.47, line 1003) when the signature fails."""

    def __init__(self) -> None:
        import apache_beam as beam

        class CallSignature(beam.DoFn):
            def process(self, rows):
                import tensorflow as tf

                try:
                    _batch_dependent_graph()(tf.zeros([rows, 8]))
                except (TypeError, tf.errors.InvalidArgumentError) as exc:
                    raise ValueError(
                        """Fail to call signature func with signature_name: {}.
              the inputs are:\n {}.
              The input_specs are:\n {}.""".format("serving_default", [b"\n\x0b..."] * rows, {})
                    ) from exc
                yield rows

        self.do_fn = CallSignature


def _beam_signature_failure() -> Exception:
    import apache_beam as beam

    try:
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create([1]) | "ExtractPredictions" >> beam.ParDo(_CallsTheSignature().do_fn())
    except Exception as err:  # as Beam re-raises it, " [while running 'ExtractPredictions']" appended
        return err
    raise AssertionError("the pipeline ran")


def _cli_output(err: Exception) -> str:
    @click.command()
    @reports_errors(stage_prefix="pipeline run failed: ")
    def command() -> None:
        raise err

    result = CliRunner().invoke(command)
    assert result.exit_code == 1
    return result.output


def test_tfma_s_signature_failure_names_the_evaluator_the_shape_the_node_and_the_fix():
    err = _beam_signature_failure()
    assert "Fail to call signature func" in str(err) and "ExtractPredictions" in str(err)
    output = _cli_output(err)
    assert output.startswith(
        "Error: pipeline run failed: Evaluator: TFMA could not run the candidate's served signature "
        "'serving_default' on a batch of eval examples: Incompatible shapes: [1,4] vs. [1,3] at node "
    )
    assert "computes a shape from the data" in output and "Fix the model so that sizes follow" in output
    assert "Nothing was promoted" in output
    assert "may be a bug" not in output and "the inputs are" not in output and len(output.splitlines()) == 1


def test_a_signature_failure_without_a_shape_error_is_still_the_evaluator_s():
    try:
        raise ValueError("Fail to call signature func with signature_name: serving_default.\n the inputs are: x")
    except ValueError as err:
        message = known_failure(err)
    assert message is not None and message.startswith("Evaluator: TFMA could not run the candidate's served")
    assert "takes serialized tf.Examples" in message


def test_a_shape_error_from_a_served_graph_names_the_cause_and_the_fix():
    output = _cli_output(_tf_shape_error())
    assert (
        "pipeline run failed: the served model: TensorFlow's graph failed on a shape: Incompatible shapes: " in output
    )
    assert "[1,4] vs. [1,3] at node " in output and "Fix the model" in output and "may be a bug" not in output


def test_the_stage_of_a_shape_error_is_the_one_whose_code_is_on_the_traceback():
    code = compile("def parity(call):\n    call()\n", "parity.py", "exec")
    trainer: dict = {"__name__": "torchtfx.components.torch_trainer.savedmodel.parity"}
    exec(code, trainer)  # a function of the Trainer's module, as its parity check calls the served model

    def call():
        raise _tf_shape_error()

    with pytest.raises(Exception) as caught:
        trainer["parity"](call)
    assert known_failure(caught.value).startswith("TorchTrainer: TensorFlow's graph failed on a shape: ")


@pytest.mark.parametrize("err", [ValueError("Fail to convert"), KeyError("probabilities"), RuntimeError("shapes")])
def test_an_error_torchtfx_cannot_name_still_says_it_may_be_a_bug(err):
    assert known_failure(err) is None
    output = _cli_output(err)
    assert f"unexpected {type(err).__name__}" in output and UNEXPECTED_HINT.split(":")[0] in output
