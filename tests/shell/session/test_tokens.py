import pytest

from sampler.messages import (
    AssistantMessage,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)
from shell.session._tokens import (
    MAX_RATIO,
    MIN_RATIO,
    TokenEstimator,
    effective_window,
    learned_window_from_overflow,
)


def conversation(text: str = "hello there"):
    return [
        SystemMessage("You are helpful."),
        UserMessage.of_text(text),
        AssistantMessage("Let me look.", (ToolCall("c1", "read_file", '{"path": "a.txt"}'),)),
        ToolMessage(ToolResult("c1", "file contents")),
    ]


def test_nothing_estimates_as_zero():
    assert TokenEstimator().estimate([]) == 0


def test_text_costs_about_one_token_per_four_characters():
    estimator = TokenEstimator()
    short = estimator.estimate([UserMessage.of_text("x" * 400)])
    long = estimator.estimate([UserMessage.of_text("x" * 4_400)])
    assert long - short == 1_000


def test_the_estimate_grows_with_every_kind_of_content():
    estimator = TokenEstimator()
    base = estimator.estimate(conversation())
    bigger = [
        conversation("hello there, and a much longer question follows"),
        [*conversation(), SystemMessage("more instructions")],
        [*conversation(), AssistantMessage("a longer answer than before")],
        [*conversation(), AssistantMessage("", (ToolCall("c2", "shell", '{"cmd": "make test"}'),))],
        [*conversation(), ToolMessage(ToolResult("c2", "x" * 100))],
    ]
    for messages in bigger:
        assert estimator.estimate(messages) > base


def test_the_estimate_never_decreases_as_text_grows():
    estimator = TokenEstimator(ratio=1.7)
    estimates = [estimator.estimate([UserMessage.of_text("y" * n)]) for n in range(200)]
    assert estimates == sorted(estimates)


def test_each_message_has_an_overhead_beyond_its_content():
    estimator = TokenEstimator()
    one = estimator.estimate([UserMessage.of_text("")])
    two = estimator.estimate([UserMessage.of_text(""), UserMessage.of_text("")])
    assert 0 < one < two


def test_images_cost_a_fixed_amount_whatever_their_data_size():
    estimator = TokenEstimator(image_tokens=1_000)
    text_only = estimator.estimate([UserMessage((TextPart("look"),))])
    small = estimator.estimate([UserMessage((TextPart("look"), ImagePart("image/png", data="AAAA")))])
    large = estimator.estimate([UserMessage((TextPart("look"), ImagePart("image/png", data="A" * 400_000)))])
    assert small - text_only == 1_000
    assert large == small


def test_tool_specs_count():
    estimator = TokenEstimator()
    spec = ToolSpec(
        "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
    )
    without = estimator.estimate(conversation())
    with_one = estimator.estimate(conversation(), tools=[spec])
    with_two = estimator.estimate(conversation(), tools=[spec, spec])
    assert without < with_one < with_two


def test_non_latin_text_costs_more_than_its_character_count_suggests():
    estimator = TokenEstimator()
    latin = estimator.estimate([UserMessage.of_text("a" * 400)])
    cjk = estimator.estimate([UserMessage.of_text("漢" * 400)])
    assert cjk > 2 * latin


def test_the_estimate_is_deterministic():
    assert TokenEstimator().estimate(conversation()) == TokenEstimator().estimate(conversation())


def test_the_ratio_scales_the_estimate():
    plain = TokenEstimator().estimate([UserMessage.of_text("z" * 4_000)])
    doubled = TokenEstimator(ratio=2.0).estimate([UserMessage.of_text("z" * 4_000)])
    assert doubled == 2 * plain


def test_calibration_moves_the_estimate_toward_the_reported_usage():
    estimator = TokenEstimator(smoothing=0.5)
    messages = [UserMessage.of_text("w" * 4_000)]
    first = estimator.estimate(messages)
    estimator.calibrate(first, 2 * first)
    second = estimator.estimate(messages)
    assert first < second < 2 * first
    assert estimator.ratio == pytest.approx(1.5)


def test_repeated_calibration_converges_on_the_reported_usage():
    estimator = TokenEstimator()
    messages = conversation("q" * 2_000)
    reported = 1_234
    for _ in range(60):
        estimator.calibrate(estimator.estimate(messages), reported)
    assert estimator.estimate(messages) == pytest.approx(reported, rel=0.01)


def test_calibration_lowers_the_ratio_when_the_provider_reports_less():
    estimator = TokenEstimator()
    estimator.calibrate(1_000, 500)
    assert estimator.ratio < 1.0


def test_calibration_is_clamped():
    high = TokenEstimator(smoothing=1.0)
    for _ in range(10):
        high.calibrate(100, 100_000)
    assert high.ratio == MAX_RATIO
    low = TokenEstimator(smoothing=1.0)
    for _ in range(10):
        low.calibrate(100_000, 1)
    assert low.ratio == MIN_RATIO


@pytest.mark.parametrize(("estimated", "reported"), [(0, 100), (100, 0), (-5, 100)])
def test_calibration_ignores_empty_reports(estimated, reported):
    estimator = TokenEstimator(ratio=1.3)
    estimator.calibrate(estimated, reported)
    assert estimator.ratio == 1.3


def test_calibration_is_deterministic():
    a, b = TokenEstimator(), TokenEstimator()
    for estimated, reported in [(100, 130), (120, 118), (1_000, 1_500)]:
        a.calibrate(estimated, reported)
        b.calibrate(estimated, reported)
    assert a.ratio == b.ratio


@pytest.mark.parametrize(
    "settings",
    [{"chars_per_token": 0}, {"image_tokens": -1}, {"smoothing": 0}, {"smoothing": 1.5}, {"ratio": 10.0}],
)
def test_settings_out_of_range_are_refused(settings):
    with pytest.raises(ValueError):
        TokenEstimator(**settings)


def test_the_effective_window_is_the_smaller_of_configured_and_learned():
    assert effective_window(128_000, None) == 128_000
    assert effective_window(128_000, 100_000) == 100_000
    assert effective_window(32_000, 100_000) == 32_000


def test_the_window_learned_from_an_overflow_is_85_percent_of_the_estimate():
    assert learned_window_from_overflow(100_000) == 85_000
    assert learned_window_from_overflow(1_001) == 850
