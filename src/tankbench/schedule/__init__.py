"""Time to answer: which run comes next, when repeats stop, which tests a race drops (scheduler, rules), how
long the rest will take (estimate), and the agent requests and run checks around a run (cooldown, steady).
Pure functions: the runner feeds them what the journal holds and journals what they decide.

Vocabulary (DESIGN.md): a *configuration* is the provisioned target state a test runs on (target + ZFS
properties + SLOG state + file size): tests of one configuration share one dataset/zvol/file. A *round* is one
more measured run of each still-active test of the configuration being worked on.

Modules, one job each: configs (which tests share a provisioned state, which get a warm-up), rules (the stopping
rule, the race and the decisions they journal), scheduler (the order of runs, rebuilt from the journal),
estimate (time left, from priors and what the journal measured), cooldown and steady (agent request / run checks).
"""
