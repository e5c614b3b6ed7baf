"""The generator's vocabulary: word lists by category (determiners, names, nouns, verbs with their past
forms, ...), each category's words in frequency order, and ``build_vocabulary`` joining them.

Part of the evaluation corpus (``gpu_dedup.testing.evalcorpus``); plain data (it imports only its error class).
"""
from ..errors import RunError


DETERMINERS = "the a this that every each another its their our his her my your one no any"

_PRONOUNS = "he she they we it you someone everyone nobody"

_NAMES = """Maria John José Anna David Sarah Peter Laura Michael Elena Thomas Sofia James Emma Carlos
Renée Jürgen Begoña André Günter Chloé Iñigo Daniel Julia Robert Alice Martin Clara Paul Nora"""

_NOUNS = """time year people way day man thing woman life child world school state family student group
country problem hand part place case week company system program question work government number night
point home water room mother area money story fact month lot right study book eye job word business issue
side kind head house service friend father power hour game line end member law car city community name
president team minute idea kid body information back parent face level office door health person art war
history party result change morning reason research girl guy moment air teacher force education foot boy
age policy process music market sense nation plan college interest death experience effect class control
care field development role effort rate heart drug show leader light voice wife police mind price report
decision son view relationship town road arm difference value building action model season society tax
director position player record paper space ground form event official matter center couple site project
activity star table need court oil situation cost industry figure street image phone data picture practice
piece land product doctor wall patient worker news test movie north love support technology step baby
computer type attention film tree source organization hair window evidence population plant letter skill
brother sister daughter husband island river bridge garden kitchen library station airport village forest
mountain beach lake ocean valley desert barn farm factory hospital church museum hotel restaurant theater
mall shop store bank bakery pharmacy prison castle palace tower harbor port coast border region province
district capital county neighborhood avenue plaza park path trail track lane highway tunnel
engine machine tool device screen keyboard button cable battery signal network server database file folder
page message email account password user tab menu setting option command feature version update error
warning request response query reply index chart graph map list note diary journal magazine newspaper
article chapter novel poem song album concert festival holiday vacation trip journey adventure dream
memory thought feeling emotion fear hope joy anger surprise silence noise sound smell taste touch color
shape size weight height length distance speed direction rim edge surface bottom top middle front
angle circle cube triangle curve dot pattern design style fashion trend culture tradition custom habit
routine rule principle theory method approach strategy tactic solution answer mistake accident disaster
crisis conflict battle victory defeat peace treaty agreement contract deal offer proposal budget profit
loss income salary wage fee bill receipt coin dollar euro wallet pocket bag box bottle cup glass plate
bowl spoon fork knife pan pot oven fridge stove sink shower bath towel soap mirror bed pillow blanket chair
sofa desk shelf drawer lamp clock calendar camera photo painting statue frame ticket passport visa
uniform shirt jacket coat dress skirt hat shoe boot glove scarf ring necklace watch bread butter cheese
milk egg meat chicken fish rice pasta soup salad fruit apple orange banana grape lemon potato tomato onion
carrot pepper salt sugar honey coffee tea juice wine beer dinner lunch breakfast meal snack recipe cook
animal dog cat horse cow sheep pig bird duck eagle owl snake lion tiger bear wolf fox rabbit mouse insect
bee butterfly spider flower grass leaf branch root seed nut stone rock sand soil mud dust smoke fire
flame ice snow rain storm wind cloud sky sun moon planet earth universe weather climate temperature summer
winter spring autumn evening afternoon midnight weekend century decade generation future past present
café résumé cliché fiancé entrée jalapeño piñata protégé décor soufflé purée exposé müesli débutante"""

_VERBS = """have:had do:did say:said get:got make:made go:went know:knew take:took see:saw come:came
think:thought look:looked want:wanted give:gave use:used find:found tell:told ask:asked work:worked
seem:seemed feel:felt try:tried leave:left call:called keep:kept begin:began help:helped show:showed
hear:heard play:played run:ran move:moved like:liked live:lived believe:believed hold:held bring:brought
write:wrote provide:provided sit:sat stand:stood lose:lost pay:paid meet:met include:included
continue:continued set:set learn:learned change:changed lead:led understand:understood watch:watched
follow:followed stop:stopped create:created speak:spoke read:read spend:spent grow:grew open:opened
walk:walked win:won offer:offered remember:remembered love:loved consider:considered appear:appeared
buy:bought wait:waited serve:served send:sent expect:expected build:built stay:stayed fall:fell cut:cut
reach:reached remain:remained suggest:suggested raise:raised pass:passed sell:sold require:required
report:reported decide:decided pull:pulled return:returned explain:explained hope:hoped
develop:developed carry:carried break:broke receive:received agree:agreed support:supported hit:hit
produce:produced eat:ate cover:covered catch:caught draw:drew choose:chose cause:caused point:pointed
listen:listened realize:realized place:placed close:closed involve:involved increase:increased
accept:accepted join:joined reduce:reduced establish:established visit:visited wear:wore
prepare:prepared enjoy:enjoyed fill:filled drive:drove finish:finished describe:described plan:planned
check:checked protect:protected paint:painted clean:cleaned cook:cooked fix:fixed pick:picked
push:pushed teach:taught sing:sang throw:threw forget:forgot fly:flew hide:hid ride:rode shake:shook
steal:stole swim:swam wake:woke wash:washed climb:climbed count:counted cross:crossed deliver:delivered
design:designed discover:discovered discuss:discussed earn:earned enter:entered examine:examined
fight:fought form:formed gather:gathered guess:guessed handle:handled hang:hung imagine:imagined
improve:improved invite:invited jump:jumped kick:kicked knock:knocked land:landed laugh:laughed
lift:lifted mark:marked mention:mentioned miss:missed notice:noticed order:ordered own:owned pack:packed
pour:poured print:printed promise:promised prove:proved publish:published repair:repaired
replace:replaced rescue:rescued review:reviewed save:saved search:searched share:shared shut:shut
solve:solved sort:sorted store:stored study:studied taste:tasted test:tested thank:thanked touch:touched
train:trained travel:traveled treat:treated trust:trusted turn:turned vote:voted warn:warned
welcome:welcomed wish:wished wonder:wondered wrap:wrapped measure:measured collect:collected
borrow:borrowed answer:answered arrange:arranged attack:attacked avoid:avoided bake:baked burn:burned
compare:compared complete:completed copy:copied dance:danced destroy:destroyed divide:divided
drop:dropped encourage:encouraged explore:explored feed:fed fold:folded greet:greeted hunt:hunted
ignore:ignored inspect:inspected launch:launched manage:managed mix:mixed obtain:obtained
organize:organized perform:performed plant:planted post:posted predict:predicted present:presented
record:recorded reject:rejected release:released rent:rented repeat:repeated select:selected
settle:settled shape:shaped sign:signed spread:spread sweep:swept tie:tied translate:translated
unlock:unlocked update:updated upload:uploaded weigh:weighed deploy:deployed install:installed
configure:configured compile:compiled download:downloaded"""

_ADJECTIVES = """good new first last long great little own other old right big high different small large
next early young important few public bad same able late hard major better economic strong possible
whole free military true federal international full special easy clear recent certain personal open red
difficult available likely short single medical current wrong private past foreign fine common poor
natural significant similar hot dead central happy serious ready simple left physical general
environmental financial blue democratic dark various entire close legal religious cold final main green
nice huge popular traditional cultural wide quiet warm famous busy empty heavy light bright calm clean
dirty dry wet soft loud sweet bitter fresh rich cheap expensive safe dangerous strange quick slow tall
narrow deep shallow thick thin sharp smooth rough flat round square tiny giant ancient modern gentle
brave proud angry tired hungry sick healthy lucky careful honest polite rude kind cruel clever silly wise
curious nervous excited bored lonely friendly funny cheerful strict patient humble useful useless
beautiful ugly pretty handsome plain fancy golden silver wooden broken hidden secret forgotten local
national global digital online remote urban rural northern southern eastern western daily weekly monthly
annual silent noisy crowded peaceful wild tame frozen boiling raw ripe sour salty spicy tasty delicious
elegant graceful clumsy awkward efficient reliable stable flexible accurate correct complex obvious
rare frequent regular normal unusual typical odd familiar independent extra basic standard official
well-known long-term full-time up-to-date old-fashioned open-source low-cost high-speed blasé passé"""

_ADVERBS = """also just very often still really never always quickly slowly together again almost already
soon finally suddenly probably certainly clearly simply recently usually perhaps quite rather nearly
easily carefully quietly loudly happily sadly early later today tomorrow yesterday tonight here there
everywhere somewhere abroad outside inside upstairs downstairs forward backward away home alone once
twice seldom rarely sometimes frequently gently badly well hard fast completely entirely partly mostly
mainly especially exactly directly immediately eventually gradually honestly luckily naturally
obviously seriously silently"""

_PREPOSITIONS = """of in for on with at from by about into over after under between through during
without before against near behind across around beyond along inside outside toward among within upon
despite like beside"""

_CONJUNCTIONS = "and but so because while although when after before until since if though once as unless"

_MODALS = "can could will would should might must may cannot won't didn't couldn't shouldn't wouldn't"

# Fixed words used verbatim by sentence patterns, and man-page style headings for template families.
FIXED_WORDS = "there was is it and about percent of in why did last year an"
_HEADINGS = "NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES FILES ENVIRONMENT NOTES BUGS AUTHOR"


def words_of(block: str) -> list[str]:
    return block.split()


def build_vocabulary() -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Concatenate the category lists; return (words, {category: (start, stop)})."""
    cats: dict[str, list[str]] = {
        "D": words_of(DETERMINERS), "S": words_of(_PRONOUNS), "K": words_of(_NAMES), "N": words_of(_NOUNS),
        "B": [p.split(":")[0] for p in words_of(_VERBS)], "V": [p.split(":")[1] for p in words_of(_VERBS)],
        "A": words_of(_ADJECTIVES), "R": words_of(_ADVERBS), "P": words_of(_PREPOSITIONS),
        "C": words_of(_CONJUNCTIONS), "M": words_of(_MODALS), "F": words_of(FIXED_WORDS), "H": words_of(_HEADINGS),
        "Y": [str(y) for y in range(1900, 2025)], "U": [str(u) for u in range(2, 101)],
    }
    words: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    for cat, ws in cats.items():
        # A word may appear in two categories (e.g. "light" noun and adjective) but not twice in one:
        # a repeat would silently double its frequency.
        if len(set(ws)) != len(ws):
            raise RunError(f"vocabulary category {cat!r} lists a word twice; remove the repeat")
        spans[cat] = (len(words), len(words) + len(ws))
        words.extend(ws)
    return words, spans
