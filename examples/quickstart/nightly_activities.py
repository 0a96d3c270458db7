"""The activities of the README's first workflow: a module of their own, which the
``python`` launcher imports (the script that starts the run must not be imported)."""


def fetch(run):                     # a python activity: gets an ActivityRun
    return {"rows": 42}


def report(run):
    return {"total": run.upstream["fetch"]["rows"]}
