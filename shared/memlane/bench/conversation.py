"""A scripted 80-turn conversation (40 user turns, 40 assistant replies) for `memlane bench tokens`.

Priya talks with her assistant over a few weeks: a move to Lisbon, her dog, a peanut allergy, a
new job, her sister's birthday, a half marathon. Early turns state facts; later turns lean on
them without repeating them. ``NEEDS`` says, for the user turns that depend on earlier ones,
which earlier turns (0-based indexes into ``TURNS``) hold the facts the answer needs: the
evidence an agent's prompt should contain at that point.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .live_thread import Script

USER = "Priya"

# (role, text). Index i is turn i; user turns are the even indexes.
TURNS: list[tuple[str, str]] = [
    ("user", "Hi! I'm Priya. I'm moving from Manchester to Lisbon at the end of March for a new job and I'm "
             "trying to get organised."),
    ("assistant", "Congratulations on the new job, Priya! Moving countries is a lot to juggle. I can help you "
                  "build a checklist for the move, paperwork, housing and settling in. Where would you like to start?"),
    ("user", "Let's start with housing. I want a one-bedroom flat near Alvalade, ideally under 1,300 euros a month, "
             "and it has to allow dogs because I have a border collie called Biscuit."),
    ("assistant", "Alvalade is a good pick: quiet, green and well connected by metro. For dog-friendly one-bedroom "
                  "flats under 1,300 euros, check Idealista and Imovirtual with the pets filter, and ask agents "
                  "directly, since many listings don't mention pets."),
    ("user", "Good to know. Also, important: I have a severe peanut allergy, so I always carry an EpiPen."),
    ("assistant", "Thanks for telling me. I'll keep that in mind for any food suggestions. In Portugal, allergens "
                  "must be listed on menus on request; the phrase 'tenho alergia a amendoim' means 'I am allergic "
                  "to peanuts'."),
    ("user", "The new job is a data engineer role at a fintech called Tagus Pay. I start on the 2nd of April."),
    ("assistant", "That gives you a few days between the move and your start date. Do you want me to plan those "
                  "first days, like registering for your NIF tax number and opening a bank account?"),
    ("user", "Yes please. What documents do I need for the NIF?"),
    ("assistant", "For a NIF as a non-EU resident you need your passport, proof of address (in the UK or in "
                  "Portugal), and sometimes a fiscal representative. Many people use an online service that "
                  "handles the appointment for a fee of 50 to 100 euros."),
    ("user", "I'd rather do it in person. My Portuguese is basic but I'm taking lessons on Tuesday evenings."),
    ("assistant", "In person works well; go to a Finanças office early in the morning to avoid queues. Your "
                  "Tuesday lessons will help. Bring copies of everything and a pen."),
    ("user", "Biscuit needs a pet passport too. He's four years old and fully vaccinated."),
    ("assistant", "Since the UK left the EU, Biscuit needs an Animal Health Certificate issued by a vet within 10 "
                  "days of travel, a microchip, and a rabies vaccination at least 21 days before the trip."),
    ("user", "Okay, I'll book the vet for mid-March. What's the best way to travel with him?"),
    ("assistant", "Many owners take the ferry from Portsmouth to Santander or Bilbao in a pet-friendly cabin and "
                  "drive down through Spain. Flying is possible, but collies usually travel in the hold."),
    ("user", "Ferry it is, I don't want him in the hold. My sister Anjali might drive down with me."),
    ("assistant", "A road trip with Anjali sounds lovely. The drive from Santander to Lisbon is about nine hours, "
                  "so plan a night's stop, perhaps in Salamanca, at a hotel that accepts dogs."),
    ("user", "Speaking of Anjali, her birthday is on the 14th of April. She loves pottery and old jazz records."),
    ("assistant", "Nice combination! A pottery workshop voucher or a vintage jazz LP would suit her. Lisbon has "
                  "good record shops around Bairro Alto if you want something local."),
    ("user", "I'm also training for the Lisbon half marathon in October. I run four times a week right now."),
    ("assistant", "Great goal. The Lisbon half is flat and fast. Keep your four runs, with one long run at the "
                  "weekend, and add strength work twice a week as your mileage grows."),
    ("user", "I usually run in the morning before work, around 6:30."),
    ("assistant", "Morning runs along the river in Lisbon are beautiful, and it's cooler then in summer. The "
                  "Monsanto park is close to Alvalade if you want hills and trails."),
    ("user", "I found a flat on Avenida da Igreja for 1,250 euros. The landlord is okay with a dog!"),
    ("assistant", "That's within your budget and right in Alvalade. Before signing, ask for the energy "
                  "certificate, check the deposit terms (usually two months) and photograph the flat's condition."),
    ("user", "Signed the lease today! I move in on the 28th of March."),
    ("assistant", "Congratulations! That leaves a few days before you start at Tagus Pay. I can draft a day-by-day "
                  "plan for the 28th of March to the 2nd of April."),
    ("user", "Not now, thanks. Can you suggest some easy dinners for my first week? I won't have much kitchen stuff."),
    ("assistant", "Try one-pan dishes: grilled fish with salad, pasta with tomatoes and spinach, chickpea and "
                  "chorizo stew, or omelettes. Keep an eye on sauces and desserts, which can contain nuts."),
    ("user", "Any good bakeries near the new flat?"),
    ("assistant", "Alvalade has several pastelarias. Pastéis de nata are usually nut-free, but many cakes use "
                  "almonds and some use peanuts, so ask before ordering anything else."),
    ("user", "I've been feeling nervous about the job. The team uses Spark and Airflow, and I've mostly used dbt."),
    ("assistant", "That's a common switch. Your dbt experience transfers well to modelling; for Spark, learn "
                  "DataFrames and partitioning first; for Airflow, write a few small DAGs locally before you start."),
    ("user", "Could you make me a two-week study plan for Spark?"),
    ("assistant", "Week 1: Spark architecture, DataFrames, transformations and actions, reading Parquet, joins. "
                  "Week 2: partitioning, caching, window functions, and a small project on public data. "
                  "About an hour a day is enough."),
    ("user", "Biscuit has been anxious since the vet visit. Any tips for calming him before the ferry?"),
    ("assistant", "Keep his routine steady, bring his own bed and a worn T-shirt of yours for the cabin, and give "
                  "him a long walk before boarding. Ask your vet about calming chews if it continues."),
    ("user", "Thanks. What should I pack in the car for the drive from Santander?"),
    ("assistant", "Water and a bowl, his food, poo bags, lead, towel, documents in a folder, snacks for you, and "
                  "a first-aid kit. Stop every two to three hours so he can stretch."),
    ("user", "We're here! Arrived in Lisbon last night. The flat is lovely and Biscuit already found the sunniest "
             "spot by the window."),
    ("assistant", "Welcome to Lisbon! I'm glad the trip went well and Biscuit is settling in. How are you feeling?"),
    ("user", "Tired but happy. Which documents did I need for the tax number again?"),
    ("assistant", "For the NIF: your passport and proof of address; you now have a Lisbon address, so your lease "
                  "works. Go in person to a Finanças office early in the morning."),
    ("user", "Done, I have my NIF. Now I need a vet in Lisbon for Biscuit. Something close to home."),
    ("assistant", "There are several veterinary clinics in Alvalade within walking distance of Avenida da Igreja. "
                  "Register him early and bring his Animal Health Certificate and vaccination record."),
    ("user", "First week at work done. The team is great, and my Spark prep really paid off."),
    ("assistant", "That's wonderful to hear! The study plan clearly helped. How are you finding the commute?"),
    ("user", "Short, 15 minutes by metro. I want to join a running club here. Any suggestions?"),
    ("assistant", "Lisbon has friendly clubs that meet along the river and in Monsanto. Look for one with early "
                  "morning sessions, since you like to run around 6:30 before work."),
    ("user", "Found one that meets at 6:45 on Tuesdays and Thursdays. But Tuesday evenings I have something, "
             "does that clash?"),
    ("assistant", "No clash: the club is in the morning and your Portuguese lessons are on Tuesday evenings."),
    ("user", "Great. I'm going to a colleague's dinner party on Saturday. What should I tell the host about food?"),
    ("assistant", "Tell the host early that you have a severe peanut allergy, ask whether any dish contains "
                  "peanuts or peanut oil, and bring your EpiPen. Offering to bring a dish you know is safe helps."),
    ("user", "Good idea. What should I bring as a gift for the host?"),
    ("assistant", "A bottle of Portuguese wine, a box of pastries from your local pastelaria, or flowers are all "
                  "welcome. If you bring pastries, pick ones you know are nut-free so you can share them too."),
    ("user", "My sister's birthday is coming up soon. What did I say she likes?"),
    ("assistant", "Anjali loves pottery and old jazz records. Her birthday is on the 14th of April."),
    ("user", "Can you find a pottery class in Lisbon I could gift her for when she visits?"),
    ("assistant", "Several studios in Lisbon run weekend wheel-throwing workshops in English. A two-person class "
                  "would let you do it together when she visits."),
    ("user", "Lovely. I also want to send her something by post in time for her birthday."),
    ("assistant", "A vintage jazz LP from a Bairro Alto record shop would travel well. Post it by the 7th of "
                  "April to be safe for the 14th."),
    ("user", "How many weeks until my half marathon, and should I change my training?"),
    ("assistant", "The Lisbon half is in October, so you have about six months. Keep four runs a week with the "
                  "club sessions, build your long run gradually and add hill work in Monsanto."),
    ("user", "I'd like to cook something nice for the team next month. Ideas that are safe for me?"),
    ("assistant", "A big pot of chickpea and spinach curry, a tray of roasted vegetables with feta, or a paella "
                  "without nuts. Check every packaged ingredient for peanuts and traces."),
    ("user", "My landlord asked when I want to renew. What did we agree about the deposit?"),
    ("assistant", "Your lease on Avenida da Igreja is 1,250 euros a month; the usual deposit is two months. Check "
                  "the signed lease for the exact terms before you answer."),
    ("user", "Biscuit has a limp after running in Monsanto. Should I worry?"),
    ("assistant", "Rest him for a day or two and check his paws for cuts or thorns. If the limp lasts more than "
                  "48 hours, take him to your vet in Alvalade."),
    ("user", "He's fine now. I'm thinking of getting a second dog. Bad idea with a one-bedroom flat?"),
    ("assistant", "It can work if Biscuit gets on with other dogs and you have time for walks; check that your "
                  "lease allows a second pet, since it mentioned one dog."),
    ("user", "Anjali is visiting in May. Where could she stay near me, since my flat only has one bedroom?"),
    ("assistant", "There are guesthouses and short-let apartments around Alvalade and Roma, a few minutes' walk "
                  "from Avenida da Igreja; booking early for May gets better prices."),
    ("user", "My manager asked me to present our new pipeline at the monthly demo. I get nervous presenting."),
    ("assistant", "Keep it to one story: the problem, the pipeline and one chart of the result. Rehearse twice "
                  "out loud and prepare answers to two or three likely questions."),
    ("user", "Back to running: my last half in Manchester took 1:52. What target should I set for Lisbon?"),
    ("assistant", "With a flat course and six months of training, aiming for about 1:47 is realistic; run your "
                  "long runs at an easy pace and add one tempo session a week."),
    ("user", "Let's recap: what's still on my to-do list for settling in?"),
    ("assistant", "Open a Portuguese bank account if you haven't, register with a local health centre, book "
                  "Anjali's pottery class, post her LP by the 7th of April, and keep training for October."),
]

# user turn → the earlier turns whose facts its answer needs
NEEDS: dict[int, list[int]] = {
    42: [9],             # which documents for the tax number (the assistant's answer)
    44: [2],             # a vet close to home (Alvalade)
    48: [20, 22],        # running club: runs four times a week, mornings at 6:30
    50: [10],            # Tuesday evenings: Portuguese lessons
    52: [4],             # food at a dinner party: peanut allergy
    56: [18],            # what does my sister like
    58: [18],            # a pottery class for her
    60: [18],            # a birthday gift by post: date and jazz records
    62: [20],            # half marathon in October
    64: [4],             # cooking safely: peanut allergy
    66: [24, 25],        # the lease: flat, price, and the deposit the assistant explained
    68: [44],            # Biscuit's vet close to home
    70: [2, 24],         # one-bedroom flat, lease mentioned one dog
    72: [18, 2],         # Anjali visiting; the one-bedroom flat in Alvalade
    76: [20],            # half marathon goal: the Lisbon half in October
}


def script() -> Script:
    """This conversation as a bench script: one exchange a day from the 1st of March 2025, as it was first run."""
    start = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
    times = [start + timedelta(days=i // 2, seconds=i % 2) for i in range(len(TURNS))]
    return Script(list(TURNS), times, dict(NEEDS), {}, USER)
