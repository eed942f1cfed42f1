"""Write-time consolidation decisions (policies/consolidation.py): pure, no embedder — similarities
are given as the service would measure them."""

from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.models import ExtractAction, Memory, MemoryType
from memlane.domain.scope import Scope
from memlane.policies.consolidation import Neighbour, Statement, decide, relate

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
SCOPE = Scope(app_id="a", tenant_id="t", agent_id="g", run_id="r")
# The knowledge-update histories in tests/data: the bench's, and the trials' of their own (sessions 18 to 37).
UPDATE_SETS = ("knowledge_updates.jsonl", "knowledge_updates_trial.jsonl", "knowledge_updates_trial2.jsonl",
               "knowledge_updates_trial3.jsonl", "knowledge_updates_trial4.jsonl", "knowledge_updates_trial5.jsonl",
               "knowledge_updates_trial6.jsonl", "knowledge_updates_trial7.jsonl",
               "knowledge_updates_trial8.jsonl", "knowledge_updates_trial9.jsonl",
               "knowledge_updates_trial10.jsonl", "knowledge_updates_trial11.jsonl", "knowledge_updates_trial12.jsonl",
               "knowledge_updates_trial13.jsonl", "knowledge_updates_trial14.jsonl")


def memory(text, day=0, mid=None):
    at = T0 + timedelta(days=day)
    return Memory(memory_id=mid or text[:20], scope=SCOPE, text=text, created_at=at, updated_at=at, observed_at=at)


def action(old, new, similarity=0.7):
    r = relate(Statement(new), Statement(old), similarity)
    return r.action if r else ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User's apartment is in Brooklyn.", "User's apartment is in Queens."),
    ("User: The code word is zz3q1tok.", "User: The code word is zz3q6tok."),
    ("User works as a nurse.", "User works as a paramedic now."),
    ("User's blood pressure is 150 over 95.", "User's blood pressure is 128 over 82."),
    ("User works for Deloitte in their Boston office.", "User works for PwC."),  # old carries more detail
    ("User lives in Boston.", "User moved from Boston to Denver last month."),
    ("User lives in Oslo.", "User moved to Bergen in the spring."),
    ("User works at Shopify.", "User joined Notion in October."),
])
def test_another_value_of_the_same_relation_is_an_update(old, new):
    assert action(old, new) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User has a dog named Rex.", "User also adopted a cat named Miso."),  # additive cue
    ("User is allergic to peanuts.", "User is allergic to shellfish."),  # a relation of several values
    ("User likes jazz.", "User likes hiking."),
    ("User's son is 7.", "User's daughter is 10."),  # another subject of the relation
    ("User works as a pharmacist.", "User also volunteers as a firefighter on weekends."),
    ("User uses Figma for design work.", "User uses Notion for planning."),
    ("User is allergic to peanuts.", "User is not allergic to shellfish."),  # denies another object
    ("Ann lives in Boston.", "Bob lives in Denver."),  # another person
])
def test_statements_that_can_both_hold_are_both_kept(old, new):
    assert action(old, new) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User is allergic to penicillin.", "User: Turns out User is not allergic to penicillin after all."),
    ("User is vegetarian.", "User is not vegetarian anymore, User started eating fish again."),
    ("User smokes about ten cigarettes a day.", "User quit smoking in March."),
])
def test_a_denial_or_an_end_is_a_retraction(old, new):
    assert action(old, new) == ExtractAction.DELETE


def test_a_restatement_is_a_noop_and_a_fuller_one_an_update():
    assert action("User works at Siemens, in the energy division.", "User works at Siemens.") == ExtractAction.NOOP
    assert action("User lives in Toronto.", "User lives in Toronto and works downtown.") == ExtractAction.UPDATE
    # a trailing remark in another clause does not deny the statement it follows
    assert action("User prefers email over phone calls.",
                  "User prefers email over phone calls, please don't call User.") == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("Gina: Can't wait to see them rock the festival.", "Gina: Can't wait to see the vid!"),  # remarks
    ("Jon: Glad to be part of it.", "Jon: Glad to hear it. Been practicing dance routines lately."),
    ("Caroline: Guitar's mostly Caroline's thing. Playing it helps Caroline get her emotions out.",
     "Caroline started playing acoustic guitar about five years ago."),  # a passage of several statements
    ("Melanie: That must have been tough for you, Caroline.", "Melanie is so happy for you, Caroline, now."),
    # From LoCoMo, each of which write time took for a change: a span that is a clause or a pronoun is no value
    ("John: That gives John some new ideas and plans for our community!",
     "John will definitely stick up for our community. Discussing it is important."),
    ("John sees, so that's the key to making a difference.",
     "John: That pic makes John thinks of how important it is to fight for better housing. We can definitely "
     "make a difference!"),
    ("Audrey: Dogs and nature bring Audrey so much joy and peace.",
     "Audrey: It reminded Audrey of when Audrey couldn't walk Audrey's dogs because of a knee injury. It was "
     "tough 'cause they bring Audrey so much joy."),
    # ... and a hope changes nothing that holds, with or without "to"
    ("Andrew: Haha yeah, Andrew does love Toby!",
     "Andrew named him Buddy because he's Andrew's buddy and Andrew hopes him and Toby become buddies!"),
])
def test_conversation_and_passages_are_never_superseded(old, new):
    assert action(old, new, similarity=0.9) == ExtractAction.ADD


def test_a_near_duplicate_with_another_number_is_not_a_noop():
    old = memory("User: The code word is zz3q1tok.")
    d = decide("User: The code word is zz3q6tok.", [Neighbour(old, 0.98)], duplicate_similarity=0.95,
               observed_at=T0 + timedelta(days=1))
    assert d.action == ExtractAction.UPDATE and d.targets == (old,) and not d.older and d.reason


def test_an_older_statement_is_read_as_the_old_one():
    newer = memory("User moved to Bergen in the spring.", day=60)
    d = decide("User lives in Oslo.", [Neighbour(newer, 0.6)], duplicate_similarity=0.95, observed_at=T0)
    assert d.action == ExtractAction.UPDATE and d.older and d.target is newer


def test_every_memory_the_statement_replaces_is_a_target():
    a, b = memory("User lives in Boston.", mid="a"), memory("User's apartment is in Boston.", mid="b")
    c = memory("User likes Boston cream pie.", mid="c")
    d = decide("User moved from Boston to Denver.", [Neighbour(a, 0.7), Neighbour(b, 0.6), Neighbour(c, 0.4)],
               duplicate_similarity=0.95, observed_at=T0 + timedelta(days=9))
    assert d.action == ExtractAction.UPDATE and {m.memory_id for m in d.targets} == {"a", "b"}


@pytest.mark.parametrize("old,new", [
    ("User is dating Mark.", "User broke up with Mark."),
    ("User is married to Mark.", "User divorced Mark."),
    ("User studies law at Harvard.", "User graduated from Harvard."),
    ("User owns a cat named Milo.", "User rehomed Milo."),
    ("User rents a flat in Lisbon.", "User bought the flat in Lisbon."),
    ("User is applying to Stanford.", "User got into Stanford."),
])
def test_a_state_left_for_another_said_with_another_verb_on_the_same_object_is_an_update(old, new):
    # The verb is the value here ("works at Ford" / "switched teams at Ford" reads the same way and is not one:
    # a rule that told them apart by the verb's place lost all of these, session 19's regression trial).
    assert action(old, new, similarity=0.7) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User drives a Tacoma.", "User took the Tacoma camping."),
    ("User drives a Prius.", "User washed the Prius today, first time since xmas."),
    ("User works at Kaiser.", "User picked up a double at Kaiser yesterday."),
    ("User rides a Trek.", "User crashed the Trek."),
    ("User owns a Vespa.", "User parked the Vespa downtown."),
    ("User uses a Kindle.", "User charged the Kindle overnight."),
])
def test_something_done_with_a_named_thing_the_relation_still_holds(old, new):
    # A trial's wrong closures: a past tense on the named thing read as what happened to the relation. Said as the
    # one known ("the Prius") or where it stood ("at Kaiser"), with a verb that changes nothing, it is an event.
    assert action(old, new, similarity=0.7) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User drives a Prius.", "User totaled the prius on the freeway."),
    ("User drives a Jeep Wrangler.", "User junked the wrangler, the frame was rusted through."),
    ("User banks with Chase.", "User closed the chase account."),
    ("User volunteers at the Red Cross.", "User stepped down at the red cross after six years."),
])
def test_a_verb_that_ends_what_held_on_the_named_thing_is_still_a_change(old, new):
    # A regression trial of the rule above in its first form: these ends were read as events.
    assert action(old, new, similarity=0.7) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new,expected", [
    ("User: HOA meeting is on the 8th at 7.", "User: HOA meeting is on the 10th at 7.", ExtractAction.UPDATE),
    ("User: Rent is $1,850 a month.", "User: Rent is $1,975 a month now.", ExtractAction.UPDATE),
    ("User: Dinner is at 8.", "User: Dinner was amazing.", ExtractAction.ADD),
    ("User: Book club meets on Thursdays.", "User: Chess club meets on Fridays.", ExtractAction.ADD),
    ("User: Jo is my sister.", "User: Jo is in town this week.", ExtractAction.ADD),
])
def test_a_thing_defined_without_its_article_is_a_statement_of_fact(old, new, expected):
    # A trial: "HOA meeting is on the 10th at 7" (a line typed without "The") was read as a remark, never compared.
    assert action(old, new) == expected


@pytest.mark.parametrize("old,new,expected", [
    ("User is dating Sam.", "User and Sam split up the chores.", ExtractAction.ADD),  # split up something: shared
    ("User is dating Sam.", "User and Sam split up last week.", ExtractAction.UPDATE),
    ("User is renting in Somerville.", "User moved to Medford.", ExtractAction.UPDATE),  # a move ends a rented home
])
def test_a_couple_splitting_up_a_thing_is_no_break_up_and_a_move_ends_renting(old, new, expected):
    assert action(old, new, similarity=0.6) == expected


@pytest.mark.parametrize("old,new,expected", [
    ("User: We have a team offsite in Sedona on April 10.", "User: the sedona thing got axed, leadership pulled the "
     "budget", ExtractAction.DELETE),
    ("User is going to Portugal with Jess in June.", "User: scrap the portugal trip, jess broke her ankle",
     ExtractAction.DELETE),
    ("User: Ava's piano recital is Saturday at 3.", "User: ava's recital got called off, the hall flooded",
     ExtractAction.DELETE),
    ("User: The kitchen reno starts on May 5.", "User: kitchen reno's not happening, the quote came back at 80k",
     ExtractAction.DELETE),
    ("User is taking a pottery workshop on Saturday morning.", "User: never mind about the pottery workshop, they "
     "canceled it", ExtractAction.DELETE),
    ("User's parents are flying in on the 12th.", "User: parents aren't coming anymore, dad's surgery got moved up",
     ExtractAction.DELETE),
    # traps: something else called off, someone else's, one occasion of a habit, an active verb of another's plan
    ("User: Flying to Denver on Thursday for the conference.", "User: the conference happy hour got canceled, lame",
     ExtractAction.ADD),
    ("User is hosting game night on Friday.", "User's sister canceled her game night so everyone's coming to User's",
     ExtractAction.ADD),
    ("User: Our trip to Tokyo is April 3 to 12.", "User cancelled the hotel in kyoto, we'll just day trip from tokyo",
     ExtractAction.ADD),
    ("User has physical therapy Mondays and Thursdays.", "User: pt is off this thursday, the therapist is out sick",
     ExtractAction.ADD),
    ("User: Heading to Vegas for Mike's bachelor party next weekend.", "User: Mike called off the meeting.",
     ExtractAction.ADD),
    ("User: The kitchen reno starts on May 5.", "User: we might scrap the kitchen reno", ExtractAction.ADD),
    ("User: The kitchen reno starts on May 5.", "User: we didn't cancel the kitchen reno", ExtractAction.ADD),
])
def test_a_plan_called_off_in_a_remark_ends_it(old, new, expected):
    # A trial: a plan called off the way chat says it ("the sedona thing got axed") was never read: no statement of
    # the speaker's. The thing called off must be all the plan's, and the plan the speaker's own.
    assert action(old, new, similarity=0.6) == expected


def test_a_memory_that_also_states_an_untouched_value_is_not_closed():
    """A turn's memory can hold two facts: a move closes "User lives in Lisbon", but not a memory that also
    holds the user's PIN — closing it hid the PIN from search (the newer statement ranks first anyway)."""
    both = memory("User lives in Lisbon and User's PIN is ALICE4471.", mid="both")
    alone = memory("User lives in Lisbon.", mid="alone")
    moved = "User moved to Porto."
    later = T0 + timedelta(days=9)
    assert decide(moved, [Neighbour(both, 0.7)], duplicate_similarity=0.95, observed_at=later).action == ExtractAction.ADD
    d = decide(moved, [Neighbour(both, 0.7), Neighbour(alone, 0.7)], duplicate_similarity=0.95, observed_at=later)
    assert d.action == ExtractAction.UPDATE and [m.memory_id for m in d.targets] == ["alone"]


def test_a_stop_cue_under_a_negation_ends_nothing():
    """"never give up" / "didn't quit" say it goes on: found in real conversations (LoCoMo), where the
    dream closed "Jon is feeling good and ready to give it his best" as ended."""
    old = "Jon: It's been a wild ride, but Jon is feeling good and ready to give it Jon's best."
    assert action(old, "Jon: That sign reminds Jon to never give up, however hard things get.", 0.6) == \
        ExtractAction.ADD
    assert action("User smokes about ten cigarettes a day.", "User didn't quit smoking.", 0.7) != \
        ExtractAction.DELETE
    assert action("User smokes about ten cigarettes a day.", "User quit smoking in March.") == ExtractAction.DELETE


@pytest.mark.parametrize("old,new", [
    # false alarms the dream raised on real conversations (LoCoMo): remarks, not changes of a fact
    ("Joanna is going to try making it tonight!", "Joanna won't give up, Joanna promise!"),
    ("Nate is so excited to see how it all plays out!", "Nate: It's new to Nate but Nate is excited to get started!"),
])
def test_a_negated_or_weak_cue_alone_reports_no_change(old, new):
    assert action(old, new, 0.66) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # Entering a state ("started at", "got a job as", "took a job at") aligns with being in it
    # ("works at", "works as"): one relation, another value, even when the two are far apart in meaning.
    ("User works at the city library.", "User started at the university hospital on Monday."),
    ("User works at a bakery.", "User took a job at the town museum last week."),
    ("User works as a cashier.", "User was hired as a lab technician in May."),
    # ... and the old value ends where a phrase of time, place or reason starts ("on weekends while ...");
    # the new statement's other clause ("no more coffee shifts") is not part of its value.
    ("User works as a barista on weekends while User studys.",
     "User got a job as a junior developer, no more coffee shifts."),
    ("User works as a waiter at night because of User's classes.", "User landed a job as a copywriter, finally."),
])
def test_entering_a_state_updates_being_in_it(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User works at the city library.", "User also started at the climbing gym on Monday."),  # additive
    ("User works as a nurse.", "User started a pottery class on Monday."),  # enters another relation
])
def test_entering_another_state_keeps_the_old_one(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # The clause with the stop cue names what the memory is about ("quit teaching" / "teacher"):
    # it ended, whatever the embedding says of the whole; with another change cue it was replaced.
    ("User is a high school math teacher.", "User quit teaching and became a data analyst."),
    ("User coaches the school soccer team.", "User stopped coaching and now runs a bakery."),
])
def test_ending_what_the_memory_names_is_a_change_however_far_in_meaning(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User drinks coffee every day.", "User stopped drinking coffee after 3pm."),
    ("User swims in the lake.", "User stopped swimming in the lake when it rains."),
    ("User bikes to work.", "User quit biking to work on weekdays, the traffic is awful."),
    ("User watches TV.", "User stopped watching TV while the baby is asleep."),
    ("User eats sweets.", "User gave up sweets during Lent."),
])
def test_a_habit_stopped_at_some_times_only_still_holds(old, new):
    """A trial's traps (knowledge_updates_trial3.jsonl, "stopped driving to work when it snows"): read as ended."""
    assert action(old, new) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User smokes.", "User quit smoking when User's son was born."),
    ("User eats meat.", "User stopped eating meat when User moved to Berlin."),
    ("User drinks coffee every day.", "User stopped drinking coffee after 2 weeks of headaches."),
    ("User drinks coffee every day.", "User stopped drinking coffee when User got pregnant."),
    ("User bikes to work.", "User moved to Oslo and stopped biking to work when it rains."),  # the move holds
])
def test_a_stop_said_with_when_it_happened_still_ends_the_habit(old, new):
    assert action(old, new) != ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User lives in Leeds.", "User moved to the early shift this month."),
    ("User lives in Leeds.", "User relocated to a desk by the window, much better light."),
    ("User lives in Leeds.", "User moved to another team, the manager is great."),
    ("User lives in Leeds.", "User moved to Thursdays for choir practice."),
])
def test_a_move_to_a_seat_a_shift_a_team_or_a_day_is_no_move_of_home(old, new):
    """Trials' traps ("moved to a standing desk", "moved to the night shift", "relocated to the corner office")."""
    assert action(old, new, similarity=0.5) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User lives in Leeds.", "User moved to York last spring."),
    ("User lives in Leeds.", "User moved to a bigger house in the countryside."),
    ("User lives in Leeds.", "User just relocated to the suburbs."),
])
def test_a_move_to_a_place_is_still_a_move_of_home(old, new):
    assert action(old, new) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User lives in Leeds.", "Now User is stuck in Leeds traffic every morning."),
    ("User works at Siemens.", "Now User cycles to Siemens instead of taking the bus."),
    ("User drives a Volvo.", "User changed the tyres on the Volvo this week."),
])
def test_a_change_of_what_the_same_name_only_sits_in_keeps_the_memory(old, new):
    """Trials' traps ("Now I'm stuck in Oakland traffic", "changed the oil in the Prius", "bike to Microsoft")."""
    assert action(old, new) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User works at Siemens.", "User left User's job at Siemens, now User is at Bosch."),
    ("User has Vodafone.", "User switched from Vodafone to Three."),
])
def test_a_change_away_from_the_same_name_is_still_a_change(old, new):
    assert action(old, new) != ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User is vegan.", "User wasn't vegan until May."),
    ("User works at Google.", "User hasn't worked at Google for long."),
    ("User lives in Boston.", "User didn't live in Boston until 2015."),
    ("User is vegan.", "User hadn't been vegan before May."),
    ("User is vegan.", "User won't be vegan forever."),
])
def test_a_negation_bounded_in_time_denies_nothing_that_holds(old, new):
    """A regression trial (session 31): "Wasn't vegan until May." closed "User is vegan."."""
    assert action(old, new) == ExtractAction.ADD


def test_a_negation_since_a_time_still_denies():
    assert action("User drinks.", "User hasn't had a drink since May.") != ExtractAction.ADD


@pytest.mark.parametrize("old,new,expected", [
    ("User is 34.", "User turned 90 last week.", ExtractAction.ADD),  # Grandma's, said before it
    ("User is 34.", "User turned 12 on Sunday.", ExtractAction.ADD),  # the dog's
    ("User is 34.", "User turned 35 yesterday.", ExtractAction.UPDATE),
    ("User's son is 8.", "User's son turned 9.", ExtractAction.UPDATE),
])
def test_an_age_far_from_the_one_held_is_someone_elses(old, new, expected):
    assert action(old, new) == expected


@pytest.mark.parametrize("old,new", [
    ("User plays the piano.", "User quit the choir and joined a band."),  # ends something else
    ("User has two cats.", "User quit smoking."),
])
def test_ending_something_else_keeps_the_memory(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # A home ("bought a house in Austin", "our apartment is in Leeds") is where someone lives: a move changes it.
    ("User: We just bought a house in Austin and User loves the neighborhood.",
     "User: We relocated to Chicago for User's wife's job."),
    ("User: Our apartment is in Leeds, close to the river.", "User: We moved to Bristol in June."),
])
def test_a_move_changes_the_home_a_memory_names(old, new):
    assert action(old, new, similarity=0.45) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # Hired (not hiring), or joining an employer (not someone for lunch): the job changed.
    ("User works at Barclays.", "User was hired by HSBC."),
    ("User works at Barclays.", "User joined HSBC for an internship."),
    ("User works at Barclays.", "User joined HSBC in March."),
    ("User works at Google.", "User was just hired by Meta."),
    ("User works at Google.", "User got officially hired by Meta."),
    ("User works at Google.", "User joined CNN for the morning show."),
    ("User works at Google.", "User joined Ubisoft for the game design team."),
])
def test_a_job_taken_elsewhere_changes_the_workplace(old, new):
    assert action(old, new, similarity=0.5) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User's parents have a house in Maine.", "User moved to Denver in May."),  # another holder's home
    ("User's family lives in Ohio.", "User relocated to Austin last year."),
])
def test_a_move_of_another_holder_keeps_the_memory(old, new):
    assert action(old, new, similarity=0.5) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User lives in Lisbon.", "User's sister Ana lives in Porto."),  # was: Lisbon superseded by the sister's Porto
    ("User works as a nurse.", "User's husband works as a teacher now."),
    ("User's brother lives in Oslo.", "User lives in Bergen."),
    ("Ann plays tennis on Sundays.", "Ann's son no longer plays tennis."),
])
def test_another_persons_fact_changes_nothing_of_the_subjects_own(old, new):
    assert action(old, new, similarity=0.8) == ExtractAction.ADD


@pytest.mark.parametrize("similarity", [0.5, 0.7])
def test_an_end_is_read_from_the_clause_that_says_it(similarity):
    """"Globex is fully remote, so User no longer needs to cycle" ends the cycling, and nothing of the job at
    Globex its other clause names: before, that job was retracted (or superseded) and no memory said where
    the user works."""
    remote = "User: Globex Analytics is fully remote, so User no longer cycles to an office."
    assert action("User works as a data scientist at Globex Analytics.", remote, similarity) == ExtractAction.ADD
    assert action("User cycles to the office every day.", remote, similarity) == ExtractAction.DELETE


def test_the_same_other_person_can_change_their_own_fact():
    assert action("User's sister lives in Porto.", "User's sister lives in Braga now.") == ExtractAction.UPDATE
    # naming the person is the subject's own fact (who the person is), which the subject's news changes
    assert action("User's girlfriend is called Emma.", "User: Emma and User broke up, and User is seeing Sofia now.",
                  similarity=0.6) == ExtractAction.UPDATE


def test_an_end_with_a_new_state_is_an_update_not_a_retraction():
    """"no more coffee shifts" ends the old job, "got a job as" says what replaced it: superseded, not denied."""
    assert action("User works as a barista on weekends while User studys.",
                  "User got a job as a junior developer, no more coffee shifts.", similarity=0.6) == ExtractAction.UPDATE
    # entering a state is itself the cue, in whatever words ("landed a job as", "was hired as")
    assert action("User works as a bartender at night because of User's classes.",
                  "User landed a job as a copywriter, no more late nights behind the bar.", 0.6) == ExtractAction.UPDATE
    assert action("User smokes about ten cigarettes a day.", "User quit smoking in March.") == ExtractAction.DELETE



@pytest.mark.parametrize("old,new", [
    # A stop verb before a preposition is a visit or a trip, not an end: "stopped by", "gone to".
    ("Caroline works at the corner store.", "Caroline stopped by the store after lunch."),
    ("Caroline loves the park near her house.", "Caroline has gone to the park with the kids."),
])
def test_a_stop_verb_of_motion_ends_nothing(old, new):
    assert action(old, new, similarity=0.55) == ExtractAction.ADD


# -- the shortcut: pairs that share no word and carry no cue are not read word by word -----------

def _history_texts():
    """Every user message of the knowledge-update cases, as a speaker's line and as a third-person memory."""
    import json
    from pathlib import Path

    texts = []
    data = Path(__file__).parents[1] / "data"
    for line in [line for name in UPDATE_SETS for line in (data / name).read_text().splitlines()]:
        for step in json.loads(line)["steps"]:
            for m in step["messages"]:
                if m["role"] == "user":
                    texts += [f"User: {m['content']}", m["content"].replace("I ", "User ").replace("My ", "User's ")]
    return texts


def test_the_shortcut_never_hides_a_change_the_full_reading_finds():
    """`relate` skips the word-by-word reading of two facts that share no content word and no attribute held
    one value at a time, and whose newer one has no change cue or verb. Over every pair of the knowledge-update histories' statements, the full
    reading finds nothing (no change, no "nothing new") in a pair the shortcut skips, at any similarity:
    similarity only ever opens a reading (`similarity >= threshold`), so none found at 1.0 is none at all."""
    from memlane.policies.consolidation import _comparable, _facts, _read_change, _share_words, statement

    said = [statement(t) for t in _history_texts()]
    pairs = [(n, o) for n in said for o in said if n is not o and _comparable(n, o) and _facts(n, o)]
    skipped = [(n, o) for n, o in pairs
               if not (n.reported_change or n.moves or _share_words(n, o) or n.states.keys() & o.states.keys())]
    assert len(pairs) > 10_000 and len(skipped) > len(pairs) / 4  # the shortcut is taken, and often
    for new, old in skipped:
        assert _read_change(new, old, 1.0) is None, (new.text, old.text)


def test_two_facts_with_nothing_in_common_are_not_aligned(monkeypatch):
    import memlane.policies.values as values

    aligned = []
    real = values.align
    monkeypatch.setattr(values, "align", lambda old, new: aligned.append(1) or real(old, new))
    assert relate(Statement("Ann plays the cello."), Statement("Ann owns a red bicycle."), 0.9) is None
    assert aligned == []
    # Sharing one word of many is not "another value": read on the two's word sets, not aligned.
    assert relate(Statement("User plays tennis with two friends from work on Saturday mornings."),
                  Statement("User plays the cello every Sunday at church."), 0.9) is None
    assert aligned == []
    # A change verb needs no shared word, a shared word no cue: both are still read.
    assert action("User works at Shopify.", "User joined Notion in October.") == ExtractAction.UPDATE
    assert action("User's apartment is in Brooklyn.", "User's apartment is in Queens.") == ExtractAction.UPDATE
    assert aligned


@pytest.mark.parametrize("old,new", [
    ("User lives in Zurich.", "User might move to Munich next year, not sure yet."),
    ("User lives in Raleigh.", "User is thinking of moving to Asheville."),
    ("User lives in Zurich.", "If User gets the job at Google, User will move to Munich."),
    ("User lives in Zurich.", "User would love to live in Lisbon someday."),
    ("User works as an architect.", "User wants to work as a pilot."),
    # A hedge in a clause of its own keeps a change that is only ahead a possibility.
    ("User lives in Zurich.", "User will move to Munich, if User gets the job."),
    ("User lives in Zurich.", "User wanted to move to Munich, maybe next year."),
    ("User lives in Zurich.", "If User moved to Munich, User could see Ana more."),
    ("User lives in Zurich.", "User is moving to Munich, User hopes."),
])
def test_a_possibility_a_wish_or_a_condition_changes_nothing_that_holds(old, new):
    assert action(old, new, 0.7) == ExtractAction.ADD
    assert action(old, new, 0.9) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User lives in Zurich.", "User moved to Munich in May."),  # the month, not the modal
    ("User is called Liz.", "User would rather be called Elizabeth now."),  # a preference, in the present
])
def test_a_month_or_a_stated_preference_is_no_possibility(old, new):
    assert action(old, new, 0.7) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # A memory trial: each was kept beside the fact it changed, read as a possibility (or said to the listener).
    ("User works at Barclays.", "User joined HSBC in March, User hopes it's a good fit."),
    ("User lives in Perth.", "User: We relocated to Sydney, maybe the best decision we ever made."),
    ("User lives in Sheffield.", "User: We moved to Bristol, if you can believe it."),
    ("User lives in Sheffield.", "User: You won't believe it, we moved to Bristol."),
])
def test_a_hedge_after_a_change_already_made_speaks_of_it_and_the_change_holds(old, new):
    assert action(old, new, 0.7) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User is vegan and allergic to soy.", "User is not vegan anymore."),
    ("User lives in Austin, works as a lawyer and has a cat named Pixel.", "User moved to San Diego."),
    ("User's brother works at Tesla, and User works at Ford.", "User's brother got a new job at Rivian."),
])
def test_a_change_of_one_fact_does_not_close_a_memory_holding_another(old, new):
    """Closing the memory would hide what its other clause still says (the allergy, the job, the user's own
    employer): it stays active, the newer statement ranks first."""
    prior = memory(old, 0, "old")
    decision = decide(new, [Neighbour(prior, 0.8)], duplicate_similarity=0.95, observed_at=T0 + timedelta(days=30))
    assert prior not in decision.targets


@pytest.mark.parametrize("old,new", [
    ("User bought a house in Austin and loves the neighborhood.", "User relocated to Chicago."),  # points back
    ("User works at Google, in the Zurich office.", "User works at Meta now."),  # a detail of the same fact
    ("User broke User's ankle and User is on crutches.", "User's ankle has healed and User is off crutches."),
])
def test_a_clause_that_goes_with_the_changed_one_is_closed_with_it(old, new):
    prior = memory(old, 0, "old")
    decision = decide(new, [Neighbour(prior, 0.8)], duplicate_similarity=0.95, observed_at=T0 + timedelta(days=30))
    assert prior in decision.targets


def test_a_thousands_separator_is_no_clause_break():
    """"$95,000" was read as the clauses "$95" and "000 now": the raise did not align with the old salary."""
    assert [c.text for c in Statement("User makes $95,000 a year now, and User likes it.").clauses()] == [
        "User makes $95,000 a year now", "User likes it."]
    assert action("User makes $85,000 a year.", "User makes $95,000 a year now.") == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new,expected", [
    ("User lives in Houston.", "Just so you know, User no longer lives in Houston.", ExtractAction.DELETE),
    ("User drives a blue Mazda 3.", "As User told you, User sold the Mazda.", ExtractAction.DELETE),
    ("User lives in Houston.", "User says you should visit Houston.", ExtractAction.ADD),  # said to someone
])
def test_an_aside_to_the_listener_does_not_make_a_statement_conversation(old, new, expected):
    assert action(old, new, 0.7) == expected


@pytest.mark.parametrize("old,new", [
    # Entering a state, said as the state it enters: an age reached, an event moved to another time,
    # a retirement, a couple's end said of both. Each aligns with the statement of that state.
    ("User is 29 years old.", "User turned 30 yesterday."),
    ("User's daughter is four years old.", "User's daughter turned five last week."),
    ("User has a dentist appointment on Tuesday.", "User's dentist appointment was postponed to Friday."),
    ("User's wedding is in June.", "User's wedding has been pushed back to October."),
    ("The team meeting is on Wednesday.", "The team meeting was moved up to Monday."),
    ("User works as an accountant at Deloitte.", "User retired last month."),
    ("User is dating Mark.", "User and Mark split up."),
])
def test_reaching_a_state_updates_the_statement_of_it(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # A promotion reports a change of the role: it counts for a statement about it, as other change cues do.
    ("User is a junior engineer at Stripe.", "User got promoted to senior engineer."),
    ("User works as a software engineer at Stripe.", "User was promoted to team lead in March."),
])
def test_a_promotion_updates_the_role(old, new):
    assert action(old, new, similarity=0.55) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User is 29 years old.", "User's car is 10 years old."),  # another holder's value
    ("User is 34 years old.", "User's daughter turned 5."),
    ("User is 29 years old.", "User turned 30 percent of the garden into a vegetable patch."),  # no age
    ("User uses an old laptop for work.", "User retired the old laptop."),  # a thing retired, not the user
    ("User works as an accountant at Deloitte.", "User's boss retired."),
    ("User works as a software engineer at Stripe.", "User's landlord was promoted to manager."),
    ("User lives in Boston.", "User moved the meeting to Friday."),  # something moved, not the home
    ("User lives in Denver.", "User moved the couch into the Boston office."),
])
def test_what_only_looks_like_reaching_a_state_changes_nothing(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # An attribute held one value at a time: another value replaces it, with or without a word in common.
    ("User is single.", "User got married last summer!"),
    ("User is vegetarian.", "User went vegan in January."),
    ("User is married to Tom.", "User is divorced now."),
    ("User is vegan.", "User has been pescatarian since May."),
    # One of a couple, said without a status word, is a relationship status too (a memory trial's "single again").
    ("User has a boyfriend named Kai.", "User is single again."),
    ("User is single.", "User is dating Sam now."),
    ("User has a girlfriend named Mia.", "User got married in June."),
])
def test_another_value_of_an_attribute_held_one_at_a_time_is_an_update(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User is vegetarian.", "User's sister is vegan."),  # another holder
    ("User is vegetarian.", "User cooked a vegan dinner for friends."),  # a word about something else
    ("User is vegetarian.", "User wants to go vegan."),  # a wish
    ("User is married.", "User booked a single room."),
    ("User is married.", "User is a single parent."),
    ("User is married.", "User's parents are divorced."),
    ("User is single.", "User's brother has a girlfriend."),
    ("User is single.", "User doesn't have a boyfriend."),
    ("User has a boyfriend named Kai.", "User has a business partner named Leo."),
    ("User is married.", "User has a partner in crime, User's dog Rex."),
])
def test_a_word_of_such_an_attribute_that_is_not_the_subjects_value_changes_nothing(old, new):
    assert action(old, new, similarity=0.4) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # Narration of a time gone by changes nothing that holds now.
    ("User works as a pharmacist.", "Back in high school User worked as a cashier at a diner."),
    ("User lives in Leeds.", "When User was a teenager User lived in Madrid."),
    ("User is married to Priya.", "User was engaged once before, years ago."),
    # Two holders of one kind, named apart: one's value is not the other's.
    ("User's dog Biscuit is 7.", "User's dog Pepper just turned 3."),
    ("User's horse Comet weighs 500 kg.", "User's horse Dusty weighs 420 kg."),
    # A person of the user's, behind a modifier, is still that person.
    ("User works for Shopify.", "User's former colleague left Shopify and joined Figma."),
    # A month is a time, not where someone moved.
    ("User lives in Porto.", "User and Rui moved in together in June."),
    # A weak cue does not make a relation of several values take one only.
    ("User plays the cello in an orchestra.", "User started playing the piano recently."),
    # The subject hiring someone is not the subject hired; joining someone for a meal is not joining an employer.
    ("User works as a nurse at Mercy.", "User hired Tom as a nanny."),
    ("User works at Google.", "User hired Dana to paint the house."),
    ("User works at Barclays.", "User joined Tom for lunch."),
    ("User works at Barclays.", "User joined Tom and Ana for a quick coffee."),
    # A regression trial of the rules above: no couple, no hedge hiding a mere cue, no plan, no one's place named.
    ("User is single.", "User has a partner at the law firm."),
    ("User is married.", "User is seeing someone about User's back pain."),
    ("User is married.", "Sam and User are still dating after 20 years of marriage."),
    ("User is single.", "User is dating apps averse, honestly."),
    ("User is single.", "User is in a relationship with User's old car, haha."),
    ("User works at Google.", "User joined Google in 2020, maybe User will stay there for a while."),
    ("User lives in Denver.",
     "User moved out of User's parents' place in 2010, maybe User will move to Austin someday."),
    ("User lives in Denver.", "User moved out of User's parents' place in 2010."),
    ("User lives in Denver.", "User will be moving to Austin, if you can believe it."),
    ("User lives in Denver.", "User is going to move to Austin, you know."),
])
def test_what_only_looks_like_a_change_of_a_fact_that_holds_changes_nothing(old, new):
    assert action(old, new, similarity=0.6) == ExtractAction.ADD


def test_the_same_named_holder_still_changes_its_own_value():
    assert action("User's dog Biscuit is 7.", "User's dog Biscuit just turned 8.", similarity=0.6) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # One sentence of a turn changes the fact; the others are talk around it.
    ("User lives in Leeds.", "Huge news! User moved to Glasgow last month. Still surrounded by boxes lol."),
    ("User is dating Omar.", "User and Omar broke up in March. User is single again."),
    ("User is vegetarian.", "Quick update. User went vegan in January."),
])
def test_a_turn_of_several_sentences_changes_a_fact_when_one_of_them_does(old, new):
    assert action(old, new, similarity=0.6) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    ("User lives in Leeds.", "Huge news! User might move to Glasgow. Still deciding."),  # a possibility
    ("User lives in Leeds.", "User's brother moved to Glasgow. User helped with the boxes."),  # another person
])
def test_a_turn_of_several_sentences_none_of_which_changes_the_fact_keeps_it(old, new):
    assert action(old, new, similarity=0.6) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # A thing's schedule, as the speaker says it, is a fact of the thing: another time replaces it, said
    # plainly or as a move.
    ("User: The choir meets on Mondays.", "User: The choir meets on Wednesdays now."),
    ("User: The board review is on the 12th.", "User: The board review got moved to the 19th."),
    ("User: The pool opens at 7am.", "User: The pool opens at 6am from this week."),
])
def test_a_things_schedule_changed_is_an_update(old, new):
    assert action(old, new, similarity=0.6) == ExtractAction.UPDATE


def test_the_set_gates_never_skip_an_alignment_that_finds_a_relation(monkeypatch):
    """A pair is aligned word by word only when its word sets allow what the alignment looks for (one holds the
    other; most words shared): over the pairs of every knowledge-update case, read at three similarities, the
    gated reading relates each pair as the ungated one does."""
    import json
    from pathlib import Path

    import memlane.policies.consolidation as consolidation

    data = Path(__file__).parents[1] / "data"
    cases = [json.loads(line) for name in UPDATE_SETS
             for line in (data / name).read_text().splitlines()]
    pairs = []
    for case in cases:
        said = [m["content"] for step in case["steps"] for m in step["messages"] if m["role"] == "user"]
        said += [t.replace("I ", "User ").replace("My ", "User's ") for t in said]
        pairs += [(a, b) for a in said for b in said if a != b]

    def read():
        out = []
        for new, old in pairs:
            for similarity in (0.0, 0.55, 0.7):
                r = relate(consolidation.statement(new), consolidation.statement(old), similarity)
                out.append(r and (r.action, r.evidence, r.reason))
        return out

    gated = read()
    monkeypatch.setattr(consolidation, "_one_holds_the_other", lambda new, old: True)
    monkeypatch.setattr(consolidation, "_may_align", lambda frame, old: True)
    ungated = read()
    assert sum(r is not None for r in gated) > 1000 and gated == ungated


def test_the_word_gates_never_skip_a_state_the_full_reading_finds():
    """A statement is read for a state entered (`as_state`) or an attribute held one at a time only when one of
    its words can start it: over every statement of both knowledge-update sets, the gate skips none that the
    full reading would have changed."""
    from memlane.domain import language as lang
    from memlane.policies.consolidation import statement

    variants = ["User is single-ish now.", "User is now vegan-leaning.", "User re-started working as a nurse.",
                "User semi-retired last year.", "User is \u212aeto now.", "User’s wedding got re-scheduled to May.",
                "User got PROMOTED to lead.", "User's gig was Pushed Back to June."]
    said = [statement(t) for t in [*_history_texts(), *variants]]
    assert sum(lang.as_state(s.text) != s.text for s in said) > 20 and sum(bool(s.states) for s in said) > 20
    for s in said:
        if not lang.may_enter(s.text):
            assert lang.as_state(s.text) == s.text, s.text
        if not lang.may_hold_state(s.text):
            assert lang.exclusive_states(s.text) == {}, s.text


def test_a_change_of_state_closes_no_memory_of_what_happened():
    """An event memory (a time was said) happened; only one that entered a state ("moved to ... last month") holds
    something a later change ends."""
    def event(text, days_before_said):
        m = memory(text)
        return m.model_copy(update={"memory_type": MemoryType.EVENT,
                                    "event_time": m.observed_at - timedelta(days=days_before_said)})

    went = event("Caroline went to a LGBTQ support group yesterday and it was so powerful.", 1)
    for joined in ("Caroline just joined a new LGBTQ activist group last Tues.",
                   "Caroline joined an activist group."):  # a change cue, and "another value" said with one
        assert decide(joined, [Neighbour(went, 0.7)], duplicate_similarity=0.95).action == ExtractAction.ADD
    assert decide("Caroline just joined a new LGBTQ activist group last Tues.",
                  [Neighbour(went.model_copy(update={"memory_type": MemoryType.FACT}), 0.7)],
                  duplicate_similarity=0.95).action == ExtractAction.UPDATE  # as a standing fact it would end
    for moved_to in ("User moved from Denver to Austin.", "User moved to Austin."):  # entered a state: it holds it
        assert decide(moved_to, [Neighbour(event("User moved to Denver last month.", 30), 0.7)],
                      duplicate_similarity=0.95).action == ExtractAction.UPDATE, moved_to
    ahead = event("User's dentist appointment is on Tuesday.", -3)  # its time ahead: a plan that can move
    assert decide("User's dentist appointment was moved to Friday.", [Neighbour(ahead, 0.7)],
                  duplicate_similarity=0.95).action == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # "used to" tells a past value: what ended is that one, not the value that holds now (a trial's four).
    ("User lives in Chicago.", "User used to live in Milwaukee before college."),
    ("User lives in Glasgow.", "User used to live in Aberdeen when User was studying."),
    ("User works at Cisco.", "User used to work at Juniper."),
    ("User drinks oat milk in User's coffee.", "User used to drink soy milk in User's coffee."),
    # Narration of a time the speaker was doing something else.
    ("User lives in Glasgow.", "When User was studying User lived in Aberdeen."),
    # Others of the speaker's, said as "our": their move is not the speaker's.
    ("User lives in Rome.", "User: Our friends moved to Florence last spring."),
    ("User lives in Rome.", "Their neighbours moved to Florence."),
    # Two holders, each in the value span: the car's age is not the cat's.
    ("User's cat is 3 years old.", "User's car is 9 years old."),
    # A person named as chat names them: the boyfriend's diet is not the user's (once "i'm a vegetarian" was
    # remembered at all, a trial's case closed it).
    ("User is a vegetarian", "User's bf is def not vegetarian lol he eats steak every day"),
])
def test_a_past_value_or_another_holders_value_changes_nothing_that_holds(old, new):
    assert action(old, new, similarity=0.7) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User lives in Chicago.", "User used to live in Chicago, now User lives in Denver."),
    ("User's cat is 3 years old.", "User's cat is 4 years old."),
    ("User lives in Rome.", "User: Our family moved to Florence last spring."),  # the speaker's family: the speaker
    # The regression trial: "used to" as "accustomed" is no past value, and what a turn says besides a past value
    # still changes the fact; the speaker among others ("our kids and I") moved too.
    ("User works at Oracle.", "User started a new job at Stripe and is getting used to the commute."),
    ("User lives in Chicago.", "User lives in Denver, User is used to the snow."),
    ("User's phone number is 555-1234.", "User's phone number is 555-0000, User still isn't used to it."),
    ("User drives a Honda.", "User drives a Tesla, which takes some getting used to."),
    ("User's favorite color is blue.", "User's favorite color is green; it used to be blue."),
    ("User lives in Chicago.", "User: Our kids and User moved to Denver."),
    ("User lives in Chicago.", "User: Their dad and User moved to Denver."),
])
def test_a_change_beside_those_still_closes_the_fact(old, new):
    assert action(old, new, similarity=0.7) == ExtractAction.UPDATE


def test_an_event_on_another_day_is_another_occasion_not_a_correction():
    """Two events already past when said, on other days: "an interview at Meta on Monday" stays when "on Wednesday
    an interview at Apple" comes (a trial: write time closed it as another value)."""
    said = T0 + timedelta(days=100)
    meta = memory("User had a job interview at Meta on Monday.").model_copy(
        update={"memory_type": MemoryType.EVENT, "event_time": T0 - timedelta(days=5)})
    apple = "User: On Wednesday User had a job interview at Apple."
    assert decide(apple, [Neighbour(meta, 0.8)], duplicate_similarity=0.95, observed_at=said,
                  event_time=said - timedelta(days=3)).action == ExtractAction.ADD
    # The same day: a corrected value of that event.
    assert decide(apple, [Neighbour(meta, 0.8)], duplicate_similarity=0.95, observed_at=said,
                  event_time=meta.event_time).action == ExtractAction.UPDATE


def test_a_plan_said_again_for_another_day_is_another_occasion_or_a_move_never_a_repeat():
    """A trial (session 32): "I have a job interview at Meta tomorrow." said again twenty days on was a near-duplicate
    NOOP: the new date was dropped, and the card showed no plan ahead. Said after the day it was planned for, it is
    another occasion (both stay); said before that day for another day, the plan moved (the new one replaces it)."""
    text = "User has a job interview at Meta tomorrow."
    planned = memory(text).model_copy(update={"memory_type": MemoryType.EVENT, "event_time": T0 + timedelta(days=1)})
    later = T0 + timedelta(days=20)
    again = decide(text, [Neighbour(planned, 1.0)], duplicate_similarity=0.95, observed_at=later,
                   event_time=later + timedelta(days=1))
    assert again.action == ExtractAction.ADD
    friday = planned.model_copy(update={"event_time": T0 + timedelta(days=4)})
    moved = decide(text, [Neighbour(friday, 1.0)], duplicate_similarity=0.95, observed_at=T0 + timedelta(days=2),
                   event_time=T0 + timedelta(days=3))
    assert moved.action == ExtractAction.UPDATE and moved.targets == (friday,)
    # Another plan ahead, or the same said on its day for another: both stay.
    other = decide("User has a dentist appointment on Monday.", [Neighbour(friday, 0.6)], duplicate_similarity=0.95,
                   observed_at=T0 + timedelta(days=2), event_time=T0 + timedelta(days=7))
    assert other.action == ExtractAction.ADD
    assert decide(text, [Neighbour(friday, 1.0)], duplicate_similarity=0.95, observed_at=T0 + timedelta(days=4),
                  event_time=T0 + timedelta(days=5)).action == ExtractAction.ADD
    # Said again before its day, for that day: a repeat.
    repeat = decide(text, [Neighbour(planned, 1.0)], duplicate_similarity=0.95, observed_at=T0 + timedelta(hours=3),
                    event_time=planned.event_time)
    assert repeat.action == ExtractAction.NOOP


@pytest.mark.parametrize("old,new", [
    # A trial of plans over time (session 32, knowledge_updates_trial7.jsonl): two plans, each of its own day, read
    # as another value of one — the first closed, the card's plans showing only the second.
    ("User is driving to Denver tomorrow.", "User is driving to Chicago next week."),
    ("User's wife flies to Oslo tomorrow.", "User's wife flies to Rome next week."),
    ("User is staying at the Hilton tomorrow.", "User is staying at the Marriott next week."),
    ("User is flying to Oslo on March 14.", "User is flying to Rome on April 2."),  # days of a month (session 33)
])
def test_two_plans_each_of_its_own_day_both_stay(old, new):
    planned = memory(old).model_copy(update={"memory_type": MemoryType.PLAN, "event_time": T0 + timedelta(days=1)})
    said = T0 + timedelta(hours=8)
    decision = decide(new, [Neighbour(planned, 0.8)], duplicate_similarity=0.95, observed_at=said,
                      event_time=said + timedelta(days=7))
    assert decision.action == ExtractAction.ADD


def test_a_plan_corrected_to_another_day_is_still_moved():
    """"Actually ... next Monday, not Friday": the old day denied, a correction — not a second appointment."""
    said = T0 + timedelta(days=2)
    planned = memory("User has a dentist appointment next Friday.").model_copy(
        update={"memory_type": MemoryType.EVENT, "event_time": T0 + timedelta(days=4)})
    decision = decide("User: Actually User's dentist appointment is next Monday, not Friday.",
                      [Neighbour(planned, 0.85)], duplicate_similarity=0.95, observed_at=said,
                      event_time=T0 + timedelta(days=7))
    assert decision.action == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # The same trial: a change said of one occasion of a habit ended or changed the habit.
    ("User has therapy every Wednesday at 4.", "User's therapy session tomorrow got cancelled."),
    ("User has therapy every Wednesday at 4.", "User's therapy session tomorrow moved to 5."),
    ("User has a piano lesson every Tuesday.", "User's piano lesson tomorrow is cancelled."),
    ("User takes ballet class on Saturdays.", "User's ballet class this Saturday is cancelled."),
])
def test_a_change_of_one_occasion_leaves_the_habit(old, new):
    assert action(old, new, similarity=0.8) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User has therapy every Wednesday at 4.", "User's therapy is on Thursdays from now on."),
    ("User has a piano lesson every Tuesday.", "User stopped the piano lessons for good."),
])
def test_a_change_of_a_habit_said_to_last_still_changes_it(old, new):
    assert action(old, new, similarity=0.8) != ExtractAction.ADD


def test_a_value_said_where_the_holder_would_be_is_still_the_value():
    """"User's second year" reads "second" as the holder: the guard for another holder's value (car / cat) hid the
    change to "third year" (the knowledge-update bench's edu-02, after the guard first landed)."""
    assert action("User is in User's second year of the nursing program.",
                  "User is in User's third year of the nursing program.") == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # A third regression trial: read as the speaker's own, a joint statement met the one-person reading's gaps
    # (a denial of a move, a plan, a move helped with) and closed where the speaker lives.
    ("User lives in Rome.", "User's sister and User went to Rome."),
    ("User lives in Chicago.", "User's wife and User never moved to Austin."),
    ("User lives in Chicago.", "User's sister and User moved her stuff to Austin."),
    ("User lives in Chicago.", "User's sister and User are moving to Austin next year."),
])
def test_a_statement_of_the_speaker_and_another_closes_nothing_the_speaker_holds(old, new):
    assert action(old, new) == ExtractAction.ADD


def test_the_speaker_joins_others_only_beside_them():
    """"our kids and User moved" is the speaker's move; "our friends moved to Florence and User stayed" is not."""
    assert action("User lives in Rome.", "User: Our friends moved to Florence and User stayed put.") == ExtractAction.ADD
    assert action("User lives in Rome.", "User: Our kids and User moved to Florence.") == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # A fourth trial's wrong closures (session 27), each kind said in other words: a change denied, one the
    # speaker ought to make, one made to a setting of the thing the memory names, a value that goes on, a value
    # that held once, and a stand-in for a few days. Each closed what still held, at 0.85-0.9.
    ("User lives in Lyon.", "User never relocated to Nice, it fell through."),
    ("User works at Siemens.", "User didn't join Bosch in the end."),
    ("User lives in Porto.", "User decided against moving to Braga."),
    ("User works at Target.", "User ought to quit Target someday."),
    ("User drives a Ford.", "User should switch to an electric car."),
    ("User uses Slack at work.", "User switched User's Slack to compact mode."),
    ("User banks with HSBC.", "User closed the savings account but User is staying with HSBC."),
    ("User lives in Austin.", "User lived in Tulsa for two years after college."),
    ("User works from the Denver office.", "User is working from the Boulder office for a few days."),
])
def test_a_change_not_made_or_not_of_what_the_memory_holds_closes_nothing(old, new):
    assert action(old, new) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # ... and what those readings must not swallow: a change said with a negation after it, a named thing
    # replaced, a value that goes on beside another that changed, a change that starts this week. The rest: a
    # regression trial's 31 changes the first version of those readings missed, each kind in other words — a
    # negation before another subject, the present perfect, "should" beside a change made, "still" of something
    # else or beside another clause changing the memory, a setting the memory is about, a stand-in with a move.
    ("User lives in Lyon.", "User is not in Lyon anymore, User moved to Nice."),
    ("User uses Slack at work.", "User switched User's Slack to Teams."),
    ("User is an engineer at Stripe.", "User works for Plaid these days, still engineering."),
    ("User: The gym opens at 8am.", "User: The gym opens at 6am starting this week."),
    ("User lives in Seattle.", "User can't believe User relocated to Tacoma last month."),
    ("User works at Intel.", "User has worked at Arm since the spring."),
    ("User lives in Denver.", "User still misses Denver, but User moved to Tulsa in March."),
    ("User is a junior analyst at Deloitte.", "User is still at Deloitte, User got promoted to senior analyst."),
    ("User's Hulu plan is the basic one.", "User switched User's Hulu to the premium plan."),
    ("User lives in Fresno.", "User is living in Modesto this week, the move went fine."),
])
def test_those_readings_leave_a_change_said_otherwise_a_change(old, new):
    assert action(old, new) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new", [
    # A held-out trial's wrong closures (session 35), each kind in other words: a friend "of the subject's", a state
    # of one day, a phrase a preposition opens where the memory names a kind, a diet for an occasion, a setting or a
    # place given to a thing named in lower case, someone else's words quoted.
    ("User lives in Portland.", "User: a neighbor of User's moved to Seattle."),
    ("User works at Boeing.", "User: a colleague of User's got hired at Airbus."),
    ("User's horse is an Arabian.", "User's horse is lame today."),
    ("User's parrot is an African grey.", "User's parrot is on antibiotics now."),
    ("User is pescatarian.", "User is vegetarian for ramadan."),
    ("User drives a Jeep.", "User switched the jeep to all-season tires."),
    ("User works for United.", "User moved User's united flight to Monday."),
    ("User lives in Phoenix.", "User: he emailed User 'User relocated to Tucson last week'"),
])
def test_what_is_someone_elses_or_passing_or_done_to_a_thing_closes_nothing(old, new):
    assert action(old, new, similarity=0.64) == ExtractAction.ADD  # closer still, only a cue_close (not applied)


@pytest.mark.parametrize("old,new", [
    # ... and the changes those readings must leave: a thing replaced from one to another, a value said with "now",
    # the subject's own words quoted, a quote beside a change, a value of the same kind, a plan put off to another
    # day, a thing's own setting moved.
    ("User drives a jeep.", "User switched from the jeep to a bronco."),
    ("User's favorite drink is tea.", "User's favorite drink is coffee now."),
    ("User lives in Phoenix.", "User said 'User finally moved to Tucson' at the party."),
    ("User lives in Phoenix.", "User moved to Tucson, User's mom said 'about time too'."),
    ("User's parrot is an African grey.", "User's parrot is a cockatoo now."),
    ("User is single.", "User is in a relationship now."),
    ("User teaches at a community college.", "User relocated to Austin and teaches at a high school now."),
    ("User is flying to lisbon on may 9.", "User moved User's lisbon flight to the 14th."),
    # a regression trial's: a change said to begin that day, and the subject's own words after a lead-in
    ("User's phone number is 555-0101.", "User's phone number is 555-0199 starting today."),
    ("User's team is Payments.", "User's team is Identity as of today."),
    ("User lives in Phoenix.", "last week User texted everyone 'User finally moved to Tucson!!'"),
    ("User's piano lessons are on Thursday evenings.", "User's teacher moved the lessons to Saturday mornings."),
])
def test_those_readings_leave_a_change_of_the_subjects_own_a_change(old, new):
    assert action(old, new) == ExtractAction.UPDATE


def test_should_beside_a_change_made_hedges_nothing_and_still_of_the_value_beside_anothers_move_keeps_it():
    assert action("User drives a Mazda.", "User sold the Mazda and bought a Subaru, User should get it detailed.") \
        != ExtractAction.ADD
    assert action("User lives in Reno.", "User is still in Reno, User's brother moved to Boise.") == ExtractAction.ADD


def test_a_plan_for_a_time_ahead_closes_no_standing_memory_but_moves_one_of_a_time():
    """"is moving to Reno next month" (its time after it was said): where User lives holds until then. A memory of
    a time (an appointment) is what such a statement can move."""
    said = T0 + timedelta(days=30)
    home = memory("User lives in Sparks.")
    assert decide("User is moving to Reno next month.", [Neighbour(home, 0.7)], duplicate_similarity=0.95,
                  observed_at=said, event_time=said + timedelta(days=30)).action == ExtractAction.ADD
    visit = memory("User's dentist appointment is on May 3.").model_copy(
        update={"event_time": T0 + timedelta(days=122)})
    assert decide("User's dentist appointment moved to May 10.", [Neighbour(visit, 0.8)], duplicate_similarity=0.95,
                  observed_at=said, event_time=T0 + timedelta(days=129)).action == ExtractAction.UPDATE
    # the time said is another clause's, beside a change made (a regression trial: the first reading took it for a
    # plan)
    job = memory("User works at Square.")
    assert decide("User joined Stripe in January and flies to Dublin next week.", [Neighbour(job, 0.7)],
                  duplicate_similarity=0.95, observed_at=said,
                  event_time=said + timedelta(days=7)).action == ExtractAction.UPDATE


def test_an_end_is_read_up_to_when_or_why_it_ended():
    """"stopped painting after User's wrist injury last spring": what ended is the painting the memory names, however
    far the two are in meaning (what it ended after is no word of the memory's). "stopped drinking coffee after 2pm"
    narrows a habit (a trial): that "after" is not cut."""
    assert action("User paints landscapes on weekends.", "User stopped painting after User's wrist injury last spring.",
                  similarity=0.3) == ExtractAction.DELETE
    assert action("User paints landscapes on weekends.", "User stopped at the gallery after work.",
                  similarity=0.3) == ExtractAction.ADD


@pytest.mark.parametrize("old,new,expected", [
    # Found this session beside a trial, there before it: two facts of one named person or animal shared only whose
    # they were, and the second closed the first ("My daughter Mia plays the violin" by "... is allergic to cats").
    ("User's niece Clara studies law in Madrid.", "User's niece Clara is afraid of spiders.", ExtractAction.ADD),
    ("User's cat Pixel is very shy.", "User's cat Pixel sleeps on the radiator.", ExtractAction.ADD),
    ("User's son is 9.", "User's son loves chess.", ExtractAction.ADD),
    # a number said of the holder alone is still its value, a number of another measure is not; what happened to the
    # holder since (a verb in the past, a cue) is a change (a regression trial's); an attribute is no holder
    ("User's son Leo is 9.", "User's son Leo is 10.", ExtractAction.UPDATE),
    ("User's dog Biscuit weighs 20 pounds.", "User's dog Biscuit is 4 years old.", ExtractAction.ADD),
    ("User's nephew Tom is a high-school student.", "User's nephew Tom graduated in June.", ExtractAction.UPDATE),
    ("User's niece Clara waits tables.", "User's niece Clara is a paralegal now.", ExtractAction.UPDATE),
    ("User's laptop is a ThinkPad.", "User's laptop is a MacBook.", ExtractAction.UPDATE),
    # A dream trial: a safe_auto dream closed a dentist appointment by a meeting with the manager, their "relation"
    # the year both are in; a date shared is no relation either.
    ("User has a dentist appointment on January 20, 2026.",
     "User has a meeting with User's manager on December 30, 2026.", ExtractAction.ADD),
    ("User has a dentist appointment on January 20, 2026.", "User has a dentist appointment on January 27, 2026.",
     ExtractAction.UPDATE),
])
def test_sharing_only_whose_fact_or_when_it_is_is_no_relation(old, new, expected):
    assert action(old, new) == expected


@pytest.mark.parametrize("old,new", [
    ("User doesn't drink alcohol.", "User doesn't eat meat."),
    ("Ann can't swim.", "Ann can't drive."),
    ("Ann isn't married.", "Ann isn't vegan."),
    ("Ben won't fly.", "Ben won't eat sushi."),
])
def test_two_negated_facts_share_no_relation_through_their_auxiliary(old, new):
    """"doesn't", "can't" carry the statement's polarity, not what it is about: found while checking search's
    readings (session 29), where "User doesn't eat meat" closed "User doesn't drink alcohol" as another value of
    the relation "doesn't" — at any similarity."""
    for similarity in (0.5, 0.7, 0.9):
        assert action(old, new, similarity) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User doesn't eat meat.", "User eats meat now."),
    ("User smokes.", "User doesn't smoke anymore."),
    ("Ann can't drive.", "Ann can drive now."),
])
def test_a_negated_auxiliary_still_denies_or_restores_what_it_names(old, new):
    assert action(old, new) == ExtractAction.DELETE



@pytest.mark.parametrize("old,new", [
    ("Ann works in Boston.", "Ann lives in Boston."),
    ("User works for Deloitte in their Boston office.", "User lives in Boston."),
    ("Ann teaches at Stanford.", "Ann studies at Stanford."),
    ("Ann is a nurse at Mayo.", "Ann volunteers at Mayo."),
])
def test_another_relation_to_one_named_thing_keeps_the_memory(old, new):
    """What the subject does now, said with another verb of the same place or name, is another relation to it — both
    hold (found beside the readings' check, session 29: "Ann lives in Boston" closed "Ann works in Boston" as
    another value of the relation 'Boston'). Told in the past it is what happened to the one relation, an update
    (`test_a_state_left_for_another_said_with_another_verb_on_the_same_object_is_an_update`)."""
    for similarity in (0.5, 0.7, 0.85):
        assert action(old, new, similarity) == ExtractAction.ADD


# -- session 29: a trial's 288 facts that both hold (its sentences are not these) -----------------------------------

@pytest.mark.parametrize("old,new", [
    ("Ben's daughter is 12.", "Ben's daughter is crazy about horses."),  # a number, and no number
    ("Ben takes Zoloft, 50mg.", "Ben takes a ceramics course on Tuesdays."),
    ("Ben lives in Leeds.", "Ben lives five minutes from the gym."),  # a preposition, and none
    ("Ben's flat is in Camden.", "Ben's flat is tiny but cozy."),
    ("Ben doesn't eat dairy.", "Ben doesn't eat before noon."),
    ("Ben's brother lives in Cork.", "Ben's brother lives for hurling season."),  # another preposition
])
def test_a_value_of_another_kind_is_another_fact(old, new):
    for similarity in (0.5, 0.7, 0.9):
        assert action(old, new, similarity) == ExtractAction.ADD


def test_a_word_pointing_back_is_no_value():
    """"worked there" is no other workplace than the one named. (Closer in meaning, the weak cue "now" still reads a
    change here: left.)"""
    assert action("Ben works at Ikea.", "Ben used to shop at Ikea before Ben worked there, now Ben is there every day.",
                  0.5) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("Ben weighs 80 kilos.", "Ben deadlifted 80 kilos yesterday."),
    ("Ben usually gets up around 6.", "Ben usually starts work around 9."),
    ("Ben's son plays chess.", "Ben's son hates chess tournaments."),
    ("Ben owns a Vespa.", "Ben rarely rides the Vespa."),
])
def test_another_verb_is_another_relation_unless_it_tells_what_happened_to_one(old, new):
    for similarity in (0.5, 0.7, 0.9):
        assert action(old, new, similarity) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("Ben doesn't drink whisky.", "Ben doesn't drink gin either."),  # "either" adds
    ("Ben lives in Leeds.", "Ben almost moved to York last spring."),  # a change not made
    ("Ben lives in Leeds.", "Ben nearly moved to York."),
    ("Ben is a member of the chess club.", "Ben is a member of the rowing club."),  # several at once
    ("Ben lives in Leeds.", "Ben's in-laws moved from Leeds to Hull."),  # someone else's
    ("Ben works at Arup.", "Ben's buddy left Arup for Atkins."),
    ("Ben's brother is 40.", "Ben's brother is 40 miles away."),  # another quantity, not the age said more fully
])
def test_what_adds_to_a_fact_or_is_someone_elses_keeps_it(old, new):
    assert action(old, new) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("Ben has three cats.", "Ben has three days off next week."),  # only a quantity shared
    ("Ben has taught in Hull for 8 years.", "Ben has been a runner for 8 years."),
    ("Ben's favorite bar is the Crown.", "Ben's favorite bar in Leeds is the Swan."),  # a narrower relation
    ("Ben's favorite album is Blue.", "Ben's favorite album this year is Hounds."),
])
def test_a_shared_quantity_or_a_narrower_relation_is_another_fact(old, new):
    for similarity in (0.5, 0.7, 0.9):
        assert action(old, new, similarity) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("Ben works at Arup.", "Ben still has friends at Arup, but Ben works at Atkins now."),
    ("Ben's credit score is 640.", "Ben's credit score jumped to 712."),
    ("Ben's resting heart rate is around 72.", "Ben's resting heart rate is down to 58."),
    ("Ben's last name is Kowalski.", "Ben changed his last name to Brennan."),
    ("Ben lives in Leeds.", "Ben moved to York nearly a year ago."),
    ("Ben is 29.", "Ben is 29 years old and loves hiking."),
])
def test_those_readings_leave_these_changes_and_restatements_as_they_were(old, new):
    assert action(old, new) == ExtractAction.UPDATE


@pytest.mark.parametrize("old,new,changed", [
    # Trial 6 (session 30): an age said as a bare number is one value at a time, of its subject or a person of its.
    ("User is 24.", "User turned 25 on sat, feeling ancient", True),
    ("User is 29 years old.", "User is 30 now.", True),
    ("User's dog Rex is 3.", "User's dog Rex turned 4 today.", True),
    ("User's son is 8.", "User's son is 9 now.", True),
    ("User is 32.", "User: Our house turned 100 this year, it was built in 1925.", False),
    ("User is 32.", "User's sister turned 30 today.", False),
    ("User is 24 and User's sister is 30.", "User's sister is 31 now.", False),
    ("User is 29.", "User is 30 minutes away.", False),
    ("User is 29.", "User is 20 weeks pregnant.", False),
])
def test_an_age_is_one_value_at_a_time(old, new, changed):
    relation = relate(Statement(new), Statement(old), 0.6)
    assert (relation is not None and relation.action == ExtractAction.UPDATE) == changed, relation


@pytest.mark.parametrize("old,new", [
    # A trial of plans over time (session 32): "on Monday" alone is undated, so an event said weeks later on a bare
    # weekday read as the remembered one, corrected.
    ("User had a job interview at Meta yesterday.", "User had a job interview at Apple on Monday."),
    ("User ran 5 miles yesterday.", "User ran 8 miles on Sunday."),
])
def test_an_event_on_a_bare_weekday_weeks_later_is_another_occasion(old, new):
    remembered = memory(old).model_copy(update={"memory_type": MemoryType.EVENT, "event_time": T0 - timedelta(days=1)})
    said = T0 + timedelta(days=23)
    decision = decide(new, [Neighbour(remembered, 0.8)], duplicate_similarity=0.95, observed_at=said, event_time=None)
    assert decision.action == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    # A trial of plans over time (session 32's leftovers): a part of the plan cancelled, the plan said to go on in
    # another clause, read as the plan ended.
    ("User is flying to Denver next Friday for the conference.",
     "User: The conference dinner got cancelled, but User is still flying to Denver next Friday."),
    ("User: The project kickoff is next Monday.",
     "User: The kickoff dinner is cancelled, the kickoff itself is still on."),
    ("User: The wedding is on Saturday.", "User: The rehearsal got called off, the wedding is still happening."),
])
def test_a_plan_said_to_go_on_beside_something_else_ended_stays(old, new):
    assert action(old, new, similarity=0.85) == ExtractAction.ADD


@pytest.mark.parametrize("old,new", [
    ("User: The project kickoff is next Monday.", "User: The kickoff is cancelled, the dinner is still on."),
    ("User lives in Austin.", "User still loves Austin, but moved to Dallas."),
])
def test_what_goes_on_beside_the_memory_ended_or_changed_does_not_keep_it(old, new):
    assert action(old, new, similarity=0.85) != ExtractAction.ADD


def test_a_plan_said_again_for_another_day_with_nothing_else_changed_moved_even_after_its_day():
    """"The product launch is scheduled for March 3", then on March 14 "... for March 17": the launch named as the one
    known, only its day changed — it moved, neither another occasion nor another plan (the knowledge-update set's
    plan-05 once days of a month were dated)."""
    planned = memory("User: The product launch is scheduled for March 3.").model_copy(
        update={"memory_type": MemoryType.EVENT, "event_time": T0 + timedelta(days=10)})
    said = T0 + timedelta(days=20)
    moved = decide("User: The product launch is scheduled for March 17.", [Neighbour(planned, 0.9)],
                   duplicate_similarity=0.95, observed_at=said, event_time=T0 + timedelta(days=24))
    assert moved.action == ExtractAction.UPDATE and moved.targets == (planned,)
    # Said to move, however long after its day: the same one moved.
    dentist = memory("User's dentist appointment is on March 12.").model_copy(
        update={"memory_type": MemoryType.EVENT, "event_time": T0 + timedelta(days=10)})
    pushed = decide("User's dentist appointment got pushed back to March 19.", [Neighbour(dentist, 0.9)],
                    duplicate_similarity=0.95, observed_at=said, event_time=T0 + timedelta(days=17))
    assert pushed.action == ExtractAction.UPDATE and pushed.targets == (dentist,)


def _planned(text, day):
    return memory(text).model_copy(update={"memory_type": MemoryType.EVENT, "event_time": T0 + timedelta(days=day)})


@pytest.mark.parametrize("old,new,said,day", [
    # A regression trial of session 33's rules (knowledge_updates_trial8.jsonl): one that comes round, named with
    # "The" after its day passed, is the next one; one more of its kind ("also") beside a plan is not its move.
    ("User: The quarterly board meeting is on March 5.", "User: The quarterly board meeting is on June 5.", 40, 96),
    ("User: The monthly team lunch is on March 3.", "User: The monthly team lunch is on April 3.", 40, 63),
    ("User has physical therapy on March 12 at 8am.", "User also has physical therapy on March 19 at 8am.", 5, 19),
    ("User is flying to Denver on March 6 for the workshop.",
     "User is flying to Denver again on April 17 for the second workshop.", 2, 47),
])
def test_another_of_its_kind_on_another_day_stays_beside_the_one_remembered(old, new, said, day):
    first = _planned(old, 5 if "12" in old else 4)
    decision = decide(new, [Neighbour(first, 0.9)], duplicate_similarity=0.95, observed_at=T0 + timedelta(days=said),
                      event_time=T0 + timedelta(days=day))
    assert decision.action == ExtractAction.ADD, decision


def test_a_day_corrected_or_put_to_another_day_is_one_plan_changed():
    flight = _planned("User's flight home is on March 28.", 27)
    for new in ("User: Actually User's flight home is March 29.",
                "User: wait no, User's flight home is march 29, User misread the ticket.",
                "User: The doctor revised User's due date to March 29."):
        target = flight if "flight" in new else _planned("User's due date is March 28.", 27)
        decision = decide(new, [Neighbour(target, 0.9)], duplicate_similarity=0.95,
                          observed_at=T0 + timedelta(days=3), event_time=T0 + timedelta(days=28))
        assert decision.action == ExtractAction.UPDATE, (new, decision)


def test_revising_a_piece_of_work_changes_no_date_of_it():
    """"Revised the intro of my thesis today" closed "my thesis is due on May 1" while "revised" was a change cue."""
    due = _planned("User's thesis is due on May 1.", 60)
    decision = decide("User revised the intro of User's thesis today.", [Neighbour(due, 0.8)],
                      duplicate_similarity=0.95, observed_at=T0 + timedelta(days=3), event_time=T0 + timedelta(days=3))
    assert decision.action == ExtractAction.ADD, decision


@pytest.mark.parametrize("old,new", [
    # A held-out trial's wrong closures (session 36), each a fact that still held:
    ("User's son plays soccer", "User's son's best friend quit soccer for baseball"),  # the friend's news
    ("User is running the half marathon in october", "User's husband dropped out of the half marathon, hamstring"),
    ("User plays chess online", "User: rage quit a chess game halfway bc User was losing lol"),  # one game
    ("User works at Adidas", "User got an offer from nike but honestly adidas treats User better, staying put"),
    ("User drives a minivan", "User: yeah yeah, User drives a lamborghini, obviously 🙄 (it's still the minivan)"),
    ("User works for the city water department",
     "User: oh sure, User is the CEO of the water department now, they just don't pay User like one"),
])
def test_someone_elses_news_one_occasion_an_offer_turned_down_or_irony_changes_nothing(old, new):
    assert action(old, new, 0.6) == ExtractAction.ADD


@pytest.mark.parametrize("old,new,expected", [
    # ... while the same changes said of the memory's own holder, of the habit, or made, still close it.
    ("User's son plays soccer", "User's son quit soccer for baseball", (ExtractAction.UPDATE, ExtractAction.DELETE)),
    ("User is running the half marathon in october", "User dropped out of the half marathon, hamstring",
     (ExtractAction.DELETE,)),
    ("User plays chess online", "User quit chess for good", (ExtractAction.DELETE, ExtractAction.UPDATE)),
    ("User works at Adidas", "User left Adidas and joined Nike", (ExtractAction.UPDATE,)),
    # Another person in another clause, or one the plan names: "dad's sick" is why, the sister is on the trip.
    ("User: We're going to Japan on April 3.", "User: We cancelled Japan, User's dad's sick.", (ExtractAction.DELETE,)),
    ("User is going to Rome with User's sister in May", "User's sister canceled the Rome trip", (ExtractAction.DELETE,)),
    # The regression trial of these rules: a job or a trip ended with "a", and a move said beside an eye roll.
    ("User works at Acme.", "User quit a job at Acme last week.", (ExtractAction.UPDATE, ExtractAction.DELETE)),
    ("User plans a trip to Japan in May.", "User cancelled a trip to Japan that they had planned for May.",
     (ExtractAction.DELETE, ExtractAction.UPDATE)),
    ("User lives in Boston.", "oh sure, User finally moved to Denver lol", (ExtractAction.UPDATE,)),
    ("User lives in Boston.", "User moved to Denver 🙄 the altitude is killing User.", (ExtractAction.UPDATE,)),
])
def test_the_same_change_of_the_holder_or_the_habit_itself_still_closes_it(old, new, expected):
    assert action(old, new, 0.6) in expected


@pytest.mark.parametrize("old,new,expected", [
    # Session 37: the gaps that short first-person facts ("I'm a nurse.", "I'm dating Mark.") expose. A couple's
    # joint subject, with the memory's holder second, is the holder's change ...
    ("User is dating Mark.", "Mark and User broke up.", (ExtractAction.UPDATE, ExtractAction.DELETE)),
    ("User is dating Mia.", "Mia and User split up.", (ExtractAction.UPDATE, ExtractAction.DELETE)),
    # ... a denial of something more specific the memory's word only names ("nurse practitioner"), or of an end
    # ("not leaving nursing"), denies nothing it holds ...
    ("User is a nurse.", "User is not a nurse practitioner, just an RN.", (ExtractAction.ADD, ExtractAction.NOOP)),
    ("User is a nurse.", "User is not leaving nursing.", (ExtractAction.ADD, ExtractAction.NOOP)),
    ("User plays soccer.", "User isn't a soccer coach.", (ExtractAction.ADD,)),
    ("User plays guitar in a band.", "User won't quit the band.", (ExtractAction.ADD, ExtractAction.NOOP)),
    # The regression trial's held-out cases: the last phrase a denial shares decides ("google HQ"), a word before
    # the shared one narrows it too ("math teacher"), and "given up" is an end denied like "gave up".
    ("User is a teacher.", "User is not a math teacher, User teaches english.",
     (ExtractAction.ADD, ExtractAction.NOOP)),
    ("User is a runner.", "User is not a marathon runner or anything, just 5ks.", (ExtractAction.ADD,)),
    ("User uses verizon.", "User doesn't use verizon fios, just their phone plan.", (ExtractAction.ADD,)),
    ("User works at Google.", "User doesn't work at google HQ, User is at the nyc office.", (ExtractAction.ADD,)),
    ("User is vegetarian.", "User hasn't given up being vegetarian, just ate fish once at a wedding.",
     (ExtractAction.ADD, ExtractAction.NOOP)),
    ("User eats meat.", "User doesn't eat red meat.", (ExtractAction.ADD,)),
    # A state said of someone else's in a clause of its own is theirs.
    ("User is dating Mia.", "User: mia's parents are getting divorced, she's pretty upset", (ExtractAction.ADD,)),
    # ... while a denial of the memory itself still ends it.
    ("User is a soccer coach.", "User isn't a soccer coach.", (ExtractAction.DELETE,)),
    ("User is vegan.", "User is not vegan anymore.", (ExtractAction.DELETE,)),
    ("User lives in Denver.", "User does not live in Denver.", (ExtractAction.DELETE,)),
    # Session 38: a couple's end in other words, married again, and a trade said with its level or specialty.
    ("User is dating Sam.", "User: Sam and User called it quits in June.",
     (ExtractAction.UPDATE, ExtractAction.DELETE)),
    ("User is divorced.", "User remarried last year!", (ExtractAction.UPDATE,)),
    ("User is a teacher.", "User is a UX designer now.", (ExtractAction.UPDATE,)),
    ("User is a paramedic.", "User is a registered nurse now.", (ExtractAction.UPDATE,)),
    ("User is divorced.", "User's ex-husband just remarried, good for him.", (ExtractAction.ADD,)),
    # A regression trial: the end of another named thing ends nothing of this one ...
    ("User is a fan of the Red Sox.", "User is no longer a fan of the Yankees.", (ExtractAction.ADD,)),
    ("User volunteers at St. Jude's.", "User no longer volunteers at Mercy Hospital.", (ExtractAction.ADD,)),
    # ... while a new value named after a change cue replaces the old one, and an end of this one ends it.
    ("User keeps User's savings at Marcus.", "User moved the savings to Ally.", (ExtractAction.UPDATE,)),
    ("User goes to Planet Fitness.", "User quit Planet Fitness.", (ExtractAction.DELETE, ExtractAction.UPDATE)),
    ("User eats meat.", "User doesn't eat meat.", (ExtractAction.DELETE,)),
    ("Mark is dating Ann.", "Mark and Bob went hiking.", (ExtractAction.ADD,)),  # no holder of the memory's
    # A name chat writes in lower case is the name the memory holds; a couple's second clause is its own.
    ("User is dating Ben.", "User and ben broke up last week, User is fine tho", (ExtractAction.UPDATE,)),
    # A relationship status said as a noun ("a widower") or by marrying someone named.
    ("User is married.", "User is a widow.", (ExtractAction.UPDATE,)),
    ("User is single.", "User married Rose last spring.", (ExtractAction.UPDATE,)),
    ("User is single.", "User's sister married Tom.", (ExtractAction.ADD,)),
    # One trade at a time, its subject after a phrase of time ...
    ("User is a paramedic.", "After twelve years on the ambulance User became a dispatcher last month.",
     (ExtractAction.UPDATE,)),
    ("User is a teacher.", "User works as a barista now.", (ExtractAction.UPDATE,)),
    # ... not a wish, the past, a trade beside it, another's, or a word between ("a retired teacher").
    ("User is a nurse.", "User wants to become a pilot.", (ExtractAction.ADD,)),
    ("User is a teacher.", "User was a nurse for years.", (ExtractAction.ADD,)),
    ("User is a nurse.", "User also works as a tutor on weekends.", (ExtractAction.ADD,)),
    ("User is a nurse.", "User's sister is a teacher.", (ExtractAction.ADD,)),
    ("User is a nurse.", "User is a retired teacher.", (ExtractAction.ADD,)),
    ("User works as a nurse at Kaiser.", "User picked up a second job as a bartender on weekends.",
     (ExtractAction.ADD,)),
    # A clause opened by a pronoun is its own: "we sold the Hamilton tickets" ends the plan (not Hamilton's news).
    ("User is seeing Hamilton on March 15 with Jess.", "User: Jess bailed so we sold the Hamilton tickets",
     (ExtractAction.DELETE,)),
])
def test_a_couple_a_narrower_denial_a_denied_end_a_status_or_a_trade(old, new, expected):
    assert action(old, new, 0.6) in expected
