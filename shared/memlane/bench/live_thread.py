"""A live thread for `memlane bench tokens`: Noor talks with her assistant for weeks, one exchange at a time.

The thread is generated from a seed out of a script of storylines — home and rent, work, health, family,
a cat, running, a trip with a friend, learning Spanish — whose beats state facts early, change some of
them later (a move, a new job, stopped medication, another destination) and lean on them much later
without repeating them; between them come one-off requests (a recipe, a letter, a tax question) and
small talk, as a real assistant's thread has. The seed decides the interleaving, the small talk and the
timing; the story is the same for every seed.

``Script.needs`` says, for the user turns that depend on facts said earlier, which user turns state each
fact's *current* value (0-based indexes into ``turns``); ``Script.stale`` lists the earlier statements
of a fact that has changed since: what a prompt should no longer rely on. A beat that needs a fact comes
at least ``MIN_GAP`` exchanges after it was stated, beyond a recent window of turns.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

USER = "Noor"
SEED = 7
EXCHANGES = 151  # 302 turns: the prompt at turn 300 is the last one measured
MIN_GAP = 8  # exchanges between a statement and a beat that needs it (16 turns: out of a 6-turn window)
START = datetime(2025, 3, 3, 8, 0, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Beat:
    user: str
    assistant: str
    states: tuple[str, ...] = ()  # facts this user turn states (or changes)
    needs: tuple[str, ...] = ()  # facts the answer needs from earlier turns
    after: tuple[str, ...] = ()  # facts that must be MIN_GAP exchanges old first (a change waits for its fact)


@dataclass(frozen=True)
class Script:
    turns: list[tuple[str, str]]  # (role, text); user turns are the even indexes
    times: list[datetime]
    needs: dict[int, list[int]] = field(default_factory=dict)
    stale: dict[int, list[int]] = field(default_factory=dict)
    user: str = USER


def _b(user: str, assistant: str, states: str = "", needs: str = "", after: str = "") -> Beat:
    keys = lambda s: tuple(s.split())  # noqa: E731
    return Beat(user, assistant, keys(states), keys(needs), keys(after) + keys(needs))


# Each storyline's beats come in order; the generator interleaves the storylines.
STORYLINES: list[list[Beat]] = [
    [  # home and rent
        _b("Hi! I'm Noor. I live in Leeds, in a rented flat on Hyde Park Road, and I'd like some help getting my "
           "life a bit more organised.",
           "Nice to meet you, Noor! Happy to help. We could start with money, work, health or plans, whatever "
           "feels most pressing.", states="home"),
        _b("Money first. My rent is 950 pounds a month and I get paid on the 28th.",
           "Then set the rent and bills to leave on the 1st, right after payday, and move your savings out on "
           "the 29th so they are gone before you can spend them.", states="rent"),
        _b("I'm filling in a budget spreadsheet. What should I put down for housing each month?",
           "Your rent as a fixed line, then council tax, energy, water and internet as monthly averages. Add a "
           "small buffer for repairs and contents insurance.", needs="rent"),
        _b("Big news: I'm moving to Bristol at the start of June. I found a flat in Clifton, near the Downs!",
           "Congratulations! Clifton is lovely, green and close to the suspension bridge. Shall I make you a "
           "moving checklist, from notice on the old flat to redirecting post?", states="home", after="home"),
        _b("The Clifton flat is 1,150 pounds a month, so a bit more than what I pay now.",
           "That is 200 more a month. With the new salary it should still fit; update the spreadsheet so the "
           "standing order and the buffer match.", states="rent", after="rent"),
        _b("Once I've moved, where could I go for a run near home without much traffic?",
           "The Downs are right on your doorstep: wide open grass with a flat loop of about three kilometres. "
           "The Avon gorge paths are good for hills.", needs="home"),
        _b("The letting agent wants me to confirm the standing order. How much is the monthly rent again?",
           "It is 1,150 pounds a month for the Clifton flat. Set the standing order for the 1st so it leaves "
           "right after payday.", needs="rent"),
    ],
    [  # work
        _b("I work as a nurse at St James's hospital in Leeds, mostly night shifts on the renal ward.",
           "Night shifts are hard on sleep and meals. I can help you plan both around your rota if you like.",
           states="job"),
        _b("My ward manager, Grace, has been really supportive about my career plans.",
           "That is valuable. A manager who backs you is also the best referee when you apply for a promotion.",
           states="manager"),
        _b("Could you help me prepare for a band 6 interview? They will ask about leadership.",
           "Prepare three short stories in the situation, task, action, result form: leading a shift, handling "
           "a conflict, and improving a process. Keep each to two minutes."),
        _b("I got it! Ward sister at the Bristol Royal Infirmary, day shifts only, starting on the 9th of June.",
           "That is wonderful news, congratulations! Day shifts will change your whole routine, sleep, meals and "
           "exercise, for the better.", states="job", after="job"),
        _b("I'd like to write a proper thank-you card to my old ward manager before I leave. Can you draft one?",
           "Dear Grace, thank you for believing in me and backing my plans from the start. I learned so much on "
           "your ward and I will miss the team. With love, Noor.", needs="manager"),
        _b("Help me plan a weekly exercise routine that fits around my shifts.",
           "With day shifts, run before work on two weekdays, do a longer run on Saturday morning and a strength "
           "session on Sunday. Keep one evening free for rest.", needs="job"),
        _b("What time should I go to bed on work nights now?",
           "For a day shift starting at 7:30, aim to sleep by 10:30 and wake at 6. Keep the same times on days "
           "off where you can.", needs="job"),
    ],
    [  # health
        _b("Something you should know: I'm allergic to shellfish. Prawns make my throat swell, so I carry an EpiPen.",
           "Thank you for telling me. I will keep it in mind for food and travel. Always carry two pens and "
           "tell the people you eat with.", states="allergy"),
        _b("My GP put me on iron tablets, one every morning, because my ferritin was low.",
           "Take them with a glass of orange juice, as vitamin C helps absorption, and keep tea and coffee an "
           "hour apart from them.", states="meds"),
        _b("My friend's birthday dinner is at a tapas bar on Saturday. Anything I should ask the restaurant?",
           "Ask which dishes contain prawns or any shellfish, whether they share fryers or pans, and whether "
           "stocks are made from seafood. Tell your friends where your EpiPen is.", needs="allergy"),
        _b("Can I have my morning coffee at the same time as my tablets?",
           "Better not: coffee reduces iron absorption. Take the tablet with orange juice on waking and have your "
           "coffee an hour later.", needs="meds"),
        _b("Good news from my blood test: my iron is back to normal and the GP said I can stop the tablets.",
           "Great news! Keep eating iron-rich food, lentils, spinach and red meat now and then, and ask for a "
           "check in six months.", states="meds", after="meds"),
        _b("I'm packing a travel wash bag. Which medicines should I bring?",
           "Your two EpiPens first, antihistamines, plasters, painkillers and rehydration sachets. No iron tablets "
           "now that your GP stopped them.", needs="meds allergy"),
    ],
    [  # family
        _b("My brother Idris turns 30 on the 9th of July. He's into bouldering and old soul records.",
           "Good to know! Thirty is a big one. Bouldering and vinyl give you plenty of gift ideas.",
           states="brother"),
        _b("My mum lives in Cardiff on her own and doesn't drive, so I usually visit her by train once a month.",
           "That is a nice routine. Railcards can cut those fares by a third if you book regularly.",
           states="mum"),
        _b("Any ideas for my brother's birthday present? I want something he'll actually use.",
           "A ten-visit pass at his bouldering wall, a good chalk bag, or a rare soul pressing from a second-hand "
           "record shop. A climbing session together would be a lovely extra.", needs="brother"),
        _b("Mum wants to visit me after the move. How can she get to my new place?",
           "From Cardiff Central there are trains to Bristol Temple Meads every half hour, under an hour. From "
           "there the number 8 bus goes up to Clifton, or a short taxi ride.", needs="mum home"),
        _b("When do I need to post my brother's present so it arrives on his birthday?",
           "Send it by first class post around the 4th of July to be safe for the 9th, or use a tracked service "
           "a few days before.", needs="brother"),
    ],
    [  # the cat
        _b("I also have a cat, Miso. She's twelve and has kidney disease, so she's on a prescription renal diet.",
           "Poor Miso. Kidney cats do well with a steady routine, fresh water everywhere and their renal food.",
           states="cat"),
        _b("What treats are okay for my cat?",
           "Stick to treats made for kidney diets, as ordinary ones are high in phosphorus. A little of her renal "
           "wet food as a treat works too.", needs="cat"),
        _b("How do I keep my cat calm on the long drive to the new flat?",
           "Use a sturdy carrier with a blanket that smells of home, a pheromone spray half an hour before, and "
           "offer water at stops. Pack her renal food for the first days.", needs="cat"),
        _b("The new vet asked what food she's on. Can you remind me what I told you?",
           "Miso is twelve, has kidney disease and eats a prescription renal diet. Bring the bag or a photo of "
           "the label to the appointment.", needs="cat"),
    ],
    [  # running
        _b("I've started Couch to 5K. I'm in week 3 and I run on Monday, Wednesday and Saturday mornings.",
           "Well done! Week 3 is where it starts to click. Keep the easy pace and don't skip the rest days.",
           states="running"),
        _b("I don't own a car, by the way. I cycle everywhere, even to work.",
           "That is great base fitness for running too. Keep a spare inner tube and lights in your bag.",
           states="transport"),
        _b("I finished Couch to 5K today! And I've signed up for the Bristol 10K on the 14th of September.",
           "Brilliant, congratulations! A 10K is the perfect next step. We can build up from 5K over the summer.",
           states="running", after="running"),
        _b("How should my training look this month?",
           "Three runs a week towards your 10K: one easy, one with short intervals and a long run adding a "
           "kilometre each week. Keep one rest day after the long run.", needs="running"),
        _b("How should I get to the start line on race day?",
           "Cycle there: plan the route the week before, check the bike parking near the start, and allow twenty "
           "minutes to lock up and warm up.", needs="running transport"),
        _b("What pace should I aim for in the race if I want to finish under an hour?",
           "Under an hour for 10 kilometres is 6 minutes per kilometre. Start at 6:05 for the first two and speed "
           "up slowly after halfway.", needs="running"),
    ],
    [  # the trip
        _b("My friend Lena and I are planning a week in Porto in late October, about 800 pounds each.",
           "Porto in October is lovely and quieter. 800 each covers flights, a nice flat and eating out if you "
           "book early.", states="trip"),
        _b("Lena is vegetarian, by the way, and she hates early flights.",
           "Noted: I will look for restaurants with good vegetarian food and flights after ten in the morning.",
           states="lena"),
        _b("Change of plan: we're going to Seville instead of Porto, same week in October.",
           "Seville is a great pick in October: still warm, no summer heat. Shall I look at flats near Santa "
           "Cruz or Triana?", states="trip", after="trip"),
        _b("Can you suggest restaurants for our trip that work for both of us?",
           "In Seville, look for tapas bars with vegetarian menus for Lena, and ask every kitchen about "
           "shellfish for you: many tapas use prawn stock. Eslava and Vegania are good places to start.",
           needs="trip lena allergy"),
        _b("How much can we each spend per day on the trip, roughly?",
           "With 800 pounds each and about 300 for flights and 280 for the flat, you have around 30 pounds a day "
           "each in Seville for food and sights.", needs="trip"),
        _b("Which flights should I look at?",
           "Bristol to Seville direct, leaving after ten in the morning so Lena is happy; a late morning flight "
           "on a Saturday is usually cheapest.", needs="lena trip"),
    ],
    [  # Spanish
        _b("I'm learning Spanish on Duolingo, twenty minutes every evening, and I'm on a 40-day streak.",
           "¡Muy bien! Twenty minutes a day is the right amount. Add a podcast on your commute for listening.",
           states="spanish"),
        _b("Give me ten phrases I'll actually need on holiday.",
           "Una mesa para dos, por favor. ¿Tiene platos vegetarianos? Soy alérgica al marisco. ¿Lleva gambas? "
           "La cuenta, por favor. ¿Dónde está la estación? Two more: ¿Cuánto cuesta? and Gracias, muy amable.",
           needs="trip allergy"),
    ],
]

# One-off requests: a real thread has many that need nothing said before.
REQUESTS: list[tuple[str, str]] = [
    ("Can you give me a lentil soup recipe that takes under half an hour?",
     "Fry an onion, garlic and a carrot, add a cup of red lentils, a tin of tomatoes and a litre of stock. Simmer "
     "twenty minutes, blend half and add cumin and lemon."),
    ("How do I descale a kettle without buying anything special?",
     "Fill it halfway with equal parts water and white vinegar or lemon juice, boil, leave it an hour, then rinse "
     "and boil clean water twice."),
    ("What's the difference between a cash ISA and a stocks and shares ISA?",
     "A cash ISA pays interest with no risk to the capital; a stocks and shares ISA invests in funds, can fall in "
     "value, but usually grows more over five years or longer."),
    ("Help me write a short complaint about a parcel that arrived two weeks late.",
     "Dear team, my order arrived fourteen days after the promised date, without any update. I would like a "
     "refund of the delivery charge. Kind regards, Noor."),
    ("Why does my sourdough come out flat?",
     "Usually an underactive starter or over-proofing. Use the starter at its peak, shorten the final proof and "
     "shape it tighter."),
    ("Can you explain what a tracker mortgage is?",
     "Its rate follows the Bank of England base rate plus a fixed margin, so your payments go up and down with "
     "it, unlike a fixed rate."),
    ("How do I get red wine out of a cotton shirt?",
     "Blot it, cover it with salt or bicarbonate, then rinse from the back with cold water and wash with a "
     "stain remover. Avoid hot water until it is gone."),
    ("Recommend a novel for a long train journey.",
     "Try 'A Gentleman in Moscow' by Amor Towles: warm, clever and easy to pick up and put down."),
    ("What's a good stretch for tight calves?",
     "Stand facing a wall, one foot back with the heel down and the knee straight, and lean in for thirty "
     "seconds; then bend the back knee a little for the lower calf."),
    ("How often should I water a peace lily?",
     "When the top few centimetres of soil are dry, usually once a week. It droops when thirsty and recovers "
     "quickly."),
    ("Can you summarise the main points of a good cover letter?",
     "Why this role, two achievements that match the job, what you would bring to the team, and a short "
     "friendly close. One page."),
    ("How long should I boil an egg for a runny yolk?",
     "Six minutes from boiling water for a large egg, then straight into cold water."),
    ("What's the best way to clean a laptop screen?",
     "Switch it off, wipe with a dry microfibre cloth, then a slightly damp one with distilled water. No "
     "window cleaner."),
    ("Help me word a message declining a wedding invitation politely.",
     "Thank you so much for inviting me. I'm sad to say I can't be there, but I'll be thinking of you both and "
     "I'd love to celebrate with you soon."),
    ("Is it worth getting a railcard if I travel by train once a month?",
     "Usually yes: a railcard costs about 35 pounds a year and saves a third on off-peak fares, so it pays for "
     "itself after two or three return trips."),
    ("How do I stop my glasses steaming up with a mask on?",
     "Pinch the mask's nose wire tight, rest the glasses on top of the mask, or wash the lenses with a drop of "
     "soap and let them air dry."),
    ("What's a quick breakfast with plenty of protein?",
     "Greek yoghurt with oats and berries, eggs on toast, or cottage cheese on rye with tomato."),
    ("Explain what a pension salary sacrifice is.",
     "You give up part of your salary and your employer pays it into your pension instead, saving income tax "
     "and National Insurance on that part."),
    ("Can you suggest a podcast about history?",
     "'The Rest Is History' is lively and well researched; 'In Our Time' is calmer and covers everything."),
    ("How do I fix a squeaky door hinge?",
     "Lift the pin out, wipe it, coat it with a little petroleum jelly or oil and tap it back in."),
    ("Give me a simple bodyweight workout for a rainy day.",
     "Three rounds of ten squats, ten push-ups, twenty lunges, a thirty-second plank and ten glute bridges."),
    ("How do I write a good out-of-office reply?",
     "Say when you are away and back, who to contact for urgent matters, and keep it to three lines."),
    ("What's the difference between baking soda and baking powder?",
     "Baking soda needs an acid in the recipe to rise; baking powder already contains the acid."),
    ("Can you help me plan a budget-friendly weekly shop?",
     "Plan five dinners that share ingredients, buy own-brand staples, frozen vegetables and seasonal fruit, "
     "and cook double portions for lunches."),
    ("How do I politely remind a friend they owe me money?",
     "Keep it light: 'Hey, just a nudge about the 40 from the concert tickets, no rush, whenever suits.'"),
    ("What's a good way to remember people's names?",
     "Repeat the name as you greet them, link it to something about them, and use it once more before you part."),
    ("Can you recommend a board game for four adults?",
     "Ticket to Ride is easy to learn and tense at the end; Codenames is great if you like talking and laughing."),
    ("How do I get rid of fruit flies in the kitchen?",
     "Put out a small dish of cider vinegar with a drop of washing-up liquid, and take the fruit bowl and bins "
     "out for a few days."),
    ("Explain compound interest simply.",
     "You earn interest on your interest: 100 at 5 percent is 105 after a year, then 110.25, and the growth "
     "speeds up over time."),
    ("What should I keep in a basic first-aid kit at home?",
     "Plasters, sterile dressings, bandages, tape, antiseptic wipes, tweezers, painkillers, antihistamines and "
     "a thermometer."),
    ("Help me write a birthday message for a colleague I don't know well.",
     "Happy birthday! Hope you have a lovely day and a slice of something nice. Best wishes, Noor."),
    ("How do I keep basil alive on a windowsill?",
     "Give it sun, water from below when the top is dry, and pinch off the tips above a pair of leaves so it "
     "grows bushy."),
    ("What's the best way to learn to touch type?",
     "Ten minutes a day on a free site like Keybr, eyes on the screen, accuracy before speed."),
    ("Can you explain what an emergency fund is for?",
     "Three to six months of essential costs in easy-access savings, for a job loss, a broken boiler or a "
     "vet bill, so you never need credit for them."),
    ("Suggest a film for a cosy Sunday evening.",
     "'Paddington 2' never fails, or 'The Grand Budapest Hotel' if you want something more stylish."),
    ("How do I clean a burnt pan?",
     "Cover the bottom with water and a spoon of bicarbonate, bring to the boil, let it cool and scrub."),
]

# Small talk: a template and its reply, with slots the seed fills.
SMALL_TALK: list[tuple[str, str]] = [
    ("Long {day} today, {weather} from start to finish.",
     "That sounds tiring. Put your feet up tonight; anything I can take off your plate?"),
    ("Just had the best {food} for lunch, I'm in a good mood.",
     "Ha, good food does that. Enjoy the rest of your {day}!"),
    ("I watched {show} last night. Have you heard of it?",
     "Yes, people rave about {show}. Did you like it?"),
    ("Ugh, I forgot my umbrella and got soaked on the way home this {part}.",
     "Oh no! Get into something dry and have a hot drink."),
    ("Quick one: what's a nice word for '{word}'?",
     "You could say '{synonym}', depending on the tone."),
    ("It's finally {weather_good} here, I might sit in the park after work.",
     "Sounds perfect. Don't forget a bit of sun cream."),
    ("I'm so sleepy this {part}, I think I need another coffee.",
     "A glass of water and a short walk can help too, but enjoy the coffee."),
    ("My neighbour's {noise} kept me up half the night.",
     "That is frustrating. Earplugs or a white noise app might help until it calms down."),
    ("Tell me something interesting, I'm bored on my break.",
     "{fact}"),
    ("I finally tidied my {room}. Feels great.",
     "Well done! A tidy {room} makes the whole place feel calmer."),
]
_SLOTS = {
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "weather": ["grey and drizzly", "windy", "pouring with rain", "freezing", "muggy", "foggy"],
    "weather_good": ["sunny", "warm", "bright and clear"],
    "food": ["falafel wrap", "ramen", "jacket potato", "halloumi salad", "pho", "bean chilli", "pasta bake"],
    "show": ["Slow Horses", "The Bear", "Bake Off", "Only Murders in the Building", "Blue Planet", "Taskmaster"],
    "part": ["morning", "afternoon", "evening"],
    "word": ["busy", "happy", "tired", "important", "difficult", "nice"],
    "synonym": ["hectic", "delighted", "worn out", "crucial", "challenging", "lovely"],
    "noise": ["dog", "party", "drum practice", "washing machine", "television"],
    "fact": ["Octopuses have three hearts and blue blood.", "Honey found in ancient Egyptian tombs was still edible.",
             "A day on Venus is longer than its year.", "Bananas are berries, but strawberries are not.",
             "Wombats produce cube-shaped droppings.", "The Eiffel Tower grows about 15 cm taller in summer."],
    "room": ["kitchen", "wardrobe", "desk", "bathroom", "hallway cupboard"],
}


def generate(seed: int = SEED, exchanges: int = EXCHANGES) -> Script:
    """The first `exchanges` exchanges of the thread told with `seed` (a shorter thread is a prefix of a longer one)."""
    rng = random.Random(seed)
    stories = [list(s) for s in STORYLINES]
    requests = list(REQUESTS)
    rng.shuffle(requests)
    total = max(exchanges, EXCHANGES)
    said: dict[str, list[int]] = {}  # fact → the exchanges that stated it, in order
    turns: list[tuple[str, str]] = []
    times: list[datetime] = []
    needs: dict[int, list[int]] = {}
    stale: dict[int, list[int]] = {}
    used: set[str] = set()
    when = START
    for n in range(total):
        beat = stories[0].pop(0) if n == 0 else _next_beat(rng, stories, said, n, total)
        if beat is None:
            user, assistant = requests.pop() if requests and rng.random() < 0.55 else _small_talk(rng, used)
            beat = Beat(user, assistant)
        if beat.needs:
            needs[2 * n] = sorted({2 * said[k][-1] for k in beat.needs})
            old = sorted({2 * i for k in beat.needs for i in said[k][:-1]})
            if old:
                stale[2 * n] = old
        for k in beat.states:
            said.setdefault(k, []).append(n)
        used.add(beat.user)
        when = _later(rng, when)
        turns += [("user", beat.user), ("assistant", beat.assistant)]
        times += [when, when + timedelta(seconds=40 + rng.randrange(80))]
    keep = 2 * exchanges
    return Script(turns[:keep], times[:keep], {t: v for t, v in needs.items() if t < keep},
                  {t: v for t, v in stale.items() if t < keep})


def _next_beat(rng: random.Random, stories: list[list[Beat]], said: dict[str, list[int]], n: int,
               total: int) -> Beat | None:
    """A storyline's next beat, at the rate that spreads what is left over the exchanges left; None: other talk."""
    ready = [s for s in stories if s and all(k in said and n - said[k][-1] >= MIN_GAP for k in s[0].after)]
    left = sum(len(s) for s in stories)
    if not ready or rng.random() >= 1.25 * left / max(total - n, 1):
        return None
    return rng.choice(ready).pop(0)


def _small_talk(rng: random.Random, used: set[str]) -> tuple[str, str]:
    for _ in range(200):  # a fresh combination: nobody says the same sentence twice in a thread
        user, assistant = rng.choice(SMALL_TALK)
        fill = {k: rng.choice(v) for k, v in _SLOTS.items()}
        fill["synonym"] = _SLOTS["synonym"][_SLOTS["word"].index(fill["word"])]
        if user.format(**fill) not in used:
            return user.format(**fill), assistant.format(**fill)
    raise RuntimeError("small talk ran out of combinations")


def _later(rng: random.Random, when: datetime) -> datetime:
    """The next exchange: minutes later in the same sitting, or another day."""
    if rng.random() < 0.6:
        return when + timedelta(minutes=2 + rng.randrange(10))
    return (when + timedelta(days=1 + rng.randrange(2))).replace(hour=7 + rng.randrange(14), minute=rng.randrange(60))
