"""The step budget: measured call costs, the prompt rows they leave, and how waiting prompts share them."""

from __future__ import annotations

from cllm_ollama.engine.prompt_rows import HOLD_STEPS, HoldRun
from cllm_ollama.engine.request import Request, SamplingParams
from cllm_ollama.engine.scheduler import Scheduler, StepPlan
from cllm_ollama.engine.slot import Slot
from cllm_ollama.engine.step_budget import (
    AUTO_FLOOR_NS,
    FULL_WIDTH_NS,
    MEDIA_SLACK,
    MIN_FULL_WIDTH_ROWS,
    MIN_MEDIA_ROWS,
    MIN_PREFILL_ROWS,
    UNMEASURED_PREFILL_ROWS,
    CallCosts,
    StepBudget,
)

MS = 1_000_000


def costs(per_row_ms: float, fixed_ms: float, rows: tuple[int, ...] = (1, 8, 32, 128, 512)) -> CallCosts:
    c = CallCosts()
    for r in rows:
        c.observe(r, int((fixed_ms + per_row_ms * r) * MS))
    return c


def test_costs_interpolate_between_measured_calls_and_scale_beyond() -> None:
    c = costs(per_row_ms=2, fixed_ms=10)
    assert c.cost(32) == 74 * MS
    assert c.cost(80) == (74 + (266 - 74) * 48 / 96) * MS  # between the 32- and 128-row calls
    assert c.cost(1024) == 1034 * MS * 2  # past the largest: its cost per row
    assert c.rows_within(266 * MS, most=4096) == 128
    assert c.rows_within(0, most=4096) == 0


def test_a_bucket_follows_its_latest_calls() -> None:
    c = CallCosts()
    c.observe(32, 100 * MS)
    for _ in range(40):
        c.observe(32, 200 * MS)
    assert abs(c.cost(32) - 200 * MS) < 1 * MS


def budget(target_ms: int = 0, cap: int = 0) -> StepBudget:
    b = StepBudget(target_ms * MS, cap)
    b.decode, b.prompt = costs(per_row_ms=4, fixed_ms=20), costs(per_row_ms=3, fixed_ms=20)
    return b


def test_prompt_rows_fill_what_the_target_leaves_beside_decode_rows() -> None:
    b = budget(target_ms=300)
    # 32 decode rows cost 148 ms; 152 ms are left; a prompt call of r rows costs 20 + 3r.
    assert b.prefill_rows(32, room=480) == 44
    assert b.prefill_rows(32, room=30) == 30  # the batch's room caps it


def test_kv_work_the_streams_already_waited_for_comes_out_of_the_prompt_rows() -> None:
    b = budget(target_ms=300)
    b.stalled(40 * MS)  # a state saved after the last step, one restored before this one
    b.stalled(20 * MS)
    assert b.prefill_rows(32, room=480) == 24  # 92 ms are left, not 152
    b.stalled(340 * MS)  # more than the target: the floor still reads a prompt on
    assert b.prefill_rows(32, room=480) == MIN_PREFILL_ROWS
    assert b.prefill_rows(0, room=512) == 512  # nobody streams: nobody waits
    b.stepped()
    assert b.prefill_rows(32, room=480) == 44


def test_a_full_width_call_is_kept_to_a_few_seconds_but_never_to_a_handful_of_rows() -> None:
    b = budget()
    assert b.full_width(512) == 512  # 20 + 3 x 512 ms: 1.6 s
    b.prompt = costs(per_row_ms=10, fixed_ms=20)  # a larger model: 512 rows would take 5.1 s
    assert b.full_width(512) == (FULL_WIDTH_NS // MS - 20) // 10 == b.prefill_rows(0, room=512)
    b.prompt = costs(per_row_ms=200, fixed_ms=400)  # a 7B model on two cores
    assert b.full_width(512) == MIN_FULL_WIDTH_ROWS
    assert b.full_width(40) == 40
    assert StepBudget().full_width(512) == 512  # nothing measured yet


def test_the_auto_target_is_twice_a_decode_step_and_never_under_the_floor() -> None:
    b = budget()
    assert b.target(32) == 2 * 148 * MS
    assert b.prefill_rows(32, room=480) == 42  # 148 ms left: (148 - 20) / 3
    assert b.target(1) == AUTO_FLOOR_NS  # 2 x 24 ms is under the floor


def test_no_prompt_starves_and_nothing_generating_means_full_width() -> None:
    b = budget(target_ms=100)  # less than the decode step itself
    assert b.prefill_rows(32, room=480) == MIN_PREFILL_ROWS
    assert b.prefill_rows(0, room=512) == 512
    assert budget(target_ms=300, cap=8).prefill_rows(32, room=480) == 8


def test_before_anything_is_measured_a_fixed_share() -> None:
    assert StepBudget().prefill_rows(4, room=508) == UNMEASURED_PREFILL_ROWS
    assert StepBudget().prefill_rows(4, room=100) == 100


class Rows(StepBudget):
    """A budget of a fixed number of prompt rows beside generating streams."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows

    def prefill_rows(self, decode_rows: int, room: int) -> int:
        return room if decode_rows == 0 else min(self.rows, room)


def scheduler(n_slots: int, n_batch: int, rows: int) -> Scheduler:
    clock = iter(range(0, 10**12, 1000))
    return Scheduler(
        n_slots, 100_000, n_batch, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=Rows(rows)
    )


def request(n: int, arrival: int) -> Request:
    """A prompt of ``n`` tokens sharing no prefix with another's (distinct first token)."""
    first = 1_000_000 * (arrival + 1)
    return Request(tuple(range(first, first + n)), SamplingParams(temperature=0), num_predict=1000, arrival_ns=arrival)


def advance(s: Scheduler) -> StepPlan:
    plan = s.schedule()
    s.update(plan, [5] * len(plan.outputs))
    return plan


def rows_of(plan: StepPlan) -> dict[int, int]:
    return {slot.seq_id: n for slot, n in plan.prefills}


def test_a_short_chat_is_not_stuck_behind_a_long_document() -> None:
    """A 40k-token prompt is being read beside a generating stream; a short chat arriving later
    has its prompt read within two steps, and the document keeps its quarter meanwhile."""
    s = scheduler(n_slots=4, n_batch=512, rows=64)
    s.add(request(4, arrival=0))
    s.add(request(4, arrival=1))
    advance(s)  # slots 0 and 1 generate from now on
    s.add(request(40_000, arrival=2))
    advance(s)
    s.add(request(40, arrival=3))
    plan = advance(s)
    assert rows_of(plan) == {2: 24, 3: 40}  # the document's quarter first, then the short prompt whole
    assert s.slots[3].state.value == "generating"
    assert rows_of(advance(s)) == {2: 64}  # the rest goes to the document again


def test_equal_prompts_arriving_together_go_in_arrival_order() -> None:
    """Fewest tokens left first: a prompt half read goes before the untouched ones, and equal ones
    in arrival order, so the first ones start generating as early as in plain FIFO."""
    s = scheduler(n_slots=8, n_batch=512, rows=96)
    for i in range(4):
        s.add(request(4, arrival=i))
    advance(s)  # four streams generate
    for i in range(4):
        s.add(request(64, arrival=10 + i))
    assert rows_of(advance(s)) == {4: 64, 5: 32}
    assert rows_of(advance(s)) == {5: 32, 6: 64}


def test_a_burst_of_prompts_gets_the_whole_batch_while_few_streams_run() -> None:
    """Three prompts waiting beside one generating stream: the step is theirs at full width (the
    budget's 16 rows would make three users wait for one), and the stream holds for it."""
    s = scheduler(n_slots=5, n_batch=512, rows=16)
    s.add(request(4, arrival=0))
    advance(s)
    for i in range(3):
        s.add(request(64, arrival=10 + i))
    plan = advance(s)
    assert rows_of(plan) == {1: 64, 2: 64, 3: 64}
    assert [slot.seq_id for slot, _ in plan.outputs] == [1, 2, 3]  # slot 0 holds
    s.add(request(64, arrival=20))  # one waiting beside four streams: the budget again
    plan = advance(s)
    assert sum(rows_of(plan).values()) == 16
    assert [slot.seq_id for slot, _ in plan.outputs] == [0, 1, 2, 3]


def decoding(plan: StepPlan) -> list[int]:
    """The sequences whose generating stream has a row in ``plan``."""
    prompts = {slot.seq_id for slot, _ in plan.prefills}
    return [slot.seq_id for slot, _ in plan.outputs if slot.seq_id not in prompts]


def test_the_streams_hold_once_for_a_whole_burst_not_at_every_step_of_it() -> None:
    """32 distinct prompts at once, 8 to a batch: the first 8 streams wait for the other 24 prompts
    in one gap of three steps (a stream then has one long gap per burst, not three stretched
    ones), and then all 32 generate together."""
    s = scheduler(n_slots=32, n_batch=512, rows=16)
    for i in range(32):
        s.add(request(64, arrival=i))
    plans = [advance(s) for _ in range(5)]
    assert [sorted(rows_of(p)) for p in plans[:4]] == [list(range(k, k + 8)) for k in range(0, 32, 8)]
    assert [decoding(p) for p in plans] == [[], [], [], [], list(range(32))]


def test_a_hold_run_is_bounded_and_the_streams_get_a_step_before_the_next() -> None:
    """Prompts that keep a crowd going for more than HOLD_STEPS steps: the streams hold for
    HOLD_STEPS steps, then decode once (beside prompt rows) before the next run."""
    s = scheduler(n_slots=40, n_batch=64, rows=16)
    s.add(request(4, arrival=0))
    advance(s)  # slot 0 generates
    for i in range(39):
        s.add(request(64, arrival=10 + i))
    plans = [advance(s) for _ in range(HOLD_STEPS + 2)]
    assert [decoding(p) for p in plans[:HOLD_STEPS]] == [[]] * HOLD_STEPS
    after = plans[HOLD_STEPS]
    assert decoding(after) == list(range(HOLD_STEPS + 1))  # slot 0 and the run's prompts, one each
    assert decoding(plans[HOLD_STEPS + 1]) == []  # the next run


def test_short_prompts_are_read_whole_while_their_call_stays_short() -> None:
    """A 500 ms prompt call holds (500 - 20) / 3 = 160 rows: the shortest prompts that fit go whole."""
    b = budget()
    assert b.whole(32, [40, 64, 100], room=480) == 2  # 104 rows; 204 would take 632 ms
    assert b.whole(32, [40, 64], room=100) == 1  # the batch's room
    assert b.whole(0, [40], room=480) == 0  # nothing generating: full width anyway
    assert StepBudget().whole(32, [40], room=480) == 0  # nothing measured yet


def test_a_short_prompt_beside_a_stream_is_read_in_one_step() -> None:
    """One stream generates; a 100-token prompt arrives. The budget alone would give it 18 rows a
    step (a 100 ms target, a 24 ms decode call, 3 ms a prompt row) and stretch six of the stream's
    steps; it is read whole in one, and its first token comes out of that step."""
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(4, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=budget())
    assert s.budget.prefill_rows(1, room=511) == 18
    s.add(request(4, arrival=0))
    advance(s)
    s.add(request(100, arrival=1))
    plan = advance(s)
    assert rows_of(plan) == {1: 100}
    assert s.slots[1].state.value == "generating"


def test_a_media_piece_keeps_to_its_target_without_the_floor() -> None:
    """A 24 ms decode step: text may stretch it to the 100 ms floor (18 prompt rows), a media piece
    to twice it only (here the one row a piece always has); with 32 streams (a 148 ms step) both
    stretch it to 2x (42 rows). Where a media row can ride in the streams' call, a media step keeps
    to 1.5x (18 rows)."""
    b = budget()
    assert b.prefill_rows(1, room=511) == 18
    assert b.prefill_rows(1, room=511, media=True) == MIN_MEDIA_ROWS == 1
    assert b.prefill_rows(32, room=480, media=True) == b.prefill_rows(32, room=480) == 42
    b.media_slack = MEDIA_SLACK
    assert b.prefill_rows(32, room=480) == 42
    assert b.prefill_rows(32, room=480, media=True) == 18
    assert b.target(32, media=True) == MEDIA_SLACK * b.decode.cost(32)


def test_a_long_document_read_in_a_burst_does_not_keep_the_streams_holding() -> None:
    """Two short prompts and a 40k-token document arrive beside a stream: the short ones make a
    burst and are read in one held step (the document gets its share of it); the run is over once
    they are, and the stream decodes while the document goes on in the budget's chunks."""
    s = scheduler(n_slots=4, n_batch=512, rows=16)
    s.add(request(4, arrival=0))
    advance(s)  # slot 0 generates
    s.add(request(40_000, arrival=1))
    s.add(request(40, arrival=2))
    s.add(request(60, arrival=3))
    held = advance(s)
    assert decoding(held) == [] and rows_of(held)[2] == 40 and rows_of(held)[3] == 60
    after = advance(s)
    assert decoding(after) == [0, 2, 3] and rows_of(after) == {1: 16}


def test_a_burst_on_a_slow_model_is_read_in_calls_of_a_few_seconds() -> None:
    """A larger model's 512-row call would take 5.1 s: a document read with nothing generating
    goes in calls of what the cap holds (anyone arriving meanwhile waits that long, not minutes),
    and so does a burst of short prompts where no narrower step fits, as many whole as it holds."""
    b = budget()
    b.prompt = costs(per_row_ms=10, fixed_ms=20)
    cap = (FULL_WIDTH_NS // MS - 20) // 10
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(16, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=b)
    s.add(request(40_000, arrival=0))
    assert [sum(rows_of(advance(s)).values()) for _ in range(3)] == [cap] * 3
    b.prompt = costs(per_row_ms=10, fixed_ms=2000)  # a call's fixed cost dominates
    cap = (FULL_WIDTH_NS // MS - 2000) // 10
    s = Scheduler(16, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=b)
    for i in range(16):
        s.add(request(64, arrival=i))
    assert b.full_width(512) == cap and b.burst([64] * 16, room=512) == cap // 64  # whole, in as many calls
    assert sum(rows_of(advance(s)).values()) == cap // 64 * 64


def test_a_burst_is_read_a_few_prompts_a_step_where_calls_cost_their_rows() -> None:
    """A prompt's first token goes out after the step that reads its end, and its stream then
    holds for the rest of the burst. Where a call costs its rows (a CPU: 20 ms fixed, 3 ms a row),
    8 prompts that one full-width step would read together go three a step: their first tokens
    come sooner at little cost to the whole read. Streams holding for the burst and requests
    queued for a slot wait for all of it: the steps widen. A burst longer than the full width is
    read at the full width, where first tokens already come a step at a time, in whole prompts
    where a cut one would delay its step's first tokens; so is one where the fixed cost dominates
    (a GPU's), filled. 0: the full width, filled."""
    cpu = budget()
    assert cpu.burst([64] * 8, room=512) == 3
    assert cpu.burst([10] * 32, room=512) == 21  # short ones: most of them a step
    # Longer than a step: whole prompts where they take as many calls as the full width filled.
    assert (cpu.burst([64] * 32, room=512), cpu.burst([10] * 32 + [64] * 8, room=512)) == (8, 35)
    assert cpu.burst([63] * 4 + [64] * 28, room=512) == 8  # filled, the ninth's 4 rows a pass of their own
    assert cpu.burst([64] * 8, room=100) == 0  # the batch holds one: the full width is as narrow
    assert cpu.burst([600], room=512) == 0  # longer than a batch: no prompt is read whole
    assert [cpu.burst([64] * 8, room=512, others=n) for n in (0, 4, 32)] == [3, 5, 0]
    # A document waiting first takes its share of every such step: each is dearer, fewer share it.
    assert (cpu.burst([64] * 6, room=512), cpu.burst([64] * 6, room=512, share=True)) == (4, 2)
    gpu = budget()
    gpu.prompt = costs(per_row_ms=0.02, fixed_ms=10)
    assert gpu.burst([64] * 8, room=512) == 0
    assert StepBudget().burst([64] * 8, room=512) == 0  # nothing measured yet
    # Three 300-row prompts: whole, first tokens after 300, 600 and 900 rows; filled, 512, 900, 900.
    assert (cpu.burst([300] * 3, room=512), gpu.burst([300] * 3, room=512)) == (1, 0)
    assert cpu.burst([300] * 3, room=512, others=32) == 0  # 32 wait for all of it: the fewer calls


def test_the_streams_hold_once_for_a_burst_read_a_few_prompts_a_step() -> None:
    """8 distinct prompts at once on the CPU's costs: the first step reads three, whose first
    tokens come out of it; those streams hold while the other five are read (one long gap, as when
    a step read all eight), then all 8 generate together."""
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(8, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=budget())
    for i in range(8):
        s.add(request(64, arrival=i))
    plans = []
    while not plans or rows_of(plans[-1]):
        plans.append(advance(s))
    burst = plans[:-1]
    assert [len(rows_of(p)) for p in burst] == [3, 4, 1]
    assert all(sorted(slot.seq_id for slot, _ in p.outputs) == sorted(rows_of(p)) for p in burst)
    assert sorted(q for p in burst for q in rows_of(p)) == list(range(8))
    assert decoding(plans[-1]) == list(range(8))


def test_a_burst_longer_than_a_step_is_read_in_whole_prompts_where_a_cut_one_delays_the_rest() -> None:
    """Three 300-token prompts at once on the CPU's costs: each step reads one whole, and its
    first token comes out of it (filled, the first step would carry 212 rows of the second and
    its first token would come only after 512 rows)."""
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(8, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=budget())
    for i in range(3):
        s.add(request(300, arrival=i))
    plans = [advance(s) for _ in range(3)]
    assert [rows_of(p) for p in plans] == [{0: 300}, {1: 300}, {2: 300}]
    assert [sorted(slot.seq_id for slot, _ in p.outputs) for p in plans] == [[0], [1], [2]]


def test_a_burst_of_near_equal_prompts_is_read_whole_the_oldest_among_the_first() -> None:
    """32 clients' prompts of 63 and 64 tokens, the oldest a 64: each step reads 8 whole (the
    shorter ones first, the oldest in the longest one's place), none cut to fill the width."""
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(32, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=budget())
    for i in range(32):
        s.add(request(63 if i in (3, 9, 17, 25) else 64, arrival=i))
    plans = [advance(s) for _ in range(4)]
    assert [len(rows_of(p)) for p in plans] == [8, 8, 8, 8]
    assert 0 in rows_of(plans[0]) and {3, 9, 17, 25} <= set(rows_of(plans[0]))
    assert all(n == (63 if q in (3, 9, 17, 25) else 64) for p in plans for q, n in rows_of(p).items())


def test_a_burst_leaves_the_oldest_prompt_its_share() -> None:
    """A 40k-token document waits first, short prompts arrive beside it and nothing generates: a
    step reads the short ones that bring first tokens soonest whole, and the document a quarter
    of the step beside them."""
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(8, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=budget())
    s.add(request(40_000, arrival=0))
    for i in range(4):
        s.add(request(60, arrival=1 + i))
    plan = advance(s)
    assert rows_of(plan) == {0: 40, 1: 60, 2: 60}  # the document: a third of 120 rows, a quarter of the step


def test_a_burst_beside_a_prompt_read_in_parts_goes_at_the_full_width() -> None:
    """A prompt whose chunk ends short of its end (here a kept length; a shared start others wait
    for is another) is not among a narrow step's prompts: where it is not the oldest, the burst
    goes at the full width, shared as before, so that it is not left waiting."""
    clock = iter(range(0, 10**12, 1000))
    s = Scheduler(8, 100_000, 512, lambda t: b"x", lambda t: False, clock=lambda: next(clock), budget=budget())
    for i in range(4):
        s.add(request(64, arrival=i))
    kept = request(64, arrival=10)
    s.add(Request(kept.prompt, kept.sampling, num_predict=1000, arrival_ns=10, keep=(32,)))
    assert rows_of(advance(s)) == {0: 64, 1: 64, 2: 64, 3: 64, 4: 32}


def test_a_hold_run_ends_when_its_requests_are_read_though_their_slots_take_new_ones() -> None:
    """A run lasts while a request it read is unfinished. A slot that a run's request left and a
    new request took is not that request: the run ends and the streams get their step."""
    run = HoldRun(n_batch=512, most=lambda: 2048)
    slots = [Slot(i, 1000) for i in range(3)]
    for i, slot in enumerate(slots):
        slot.assign(request(64, arrival=i), 0, now_ns=0)
    assert run.holds(slots[1:], n_generating=1)
    run.read(slots[1:], 128)
    slots[1].abort(now_ns=0)  # slot 1's request ended; a new one takes its slot
    slots[1].assign(request(64, arrival=10), 0, now_ns=0)
    assert run.holds(slots[1:2], n_generating=2) is False


def test_a_hold_run_reads_at_most_its_rows_then_the_streams_get_a_step() -> None:
    run = HoldRun(n_batch=512, most=lambda: 128)
    slots = [Slot(i, 1000) for i in range(4)]
    for i, slot in enumerate(slots):
        slot.assign(request(64, arrival=i), 0, now_ns=0)
    assert run.holds(slots, n_generating=1)
    run.read(slots, 128)
    assert run.holds(slots, n_generating=1) is False  # the streams' step
    assert run.holds(slots, n_generating=1)  # the next run
