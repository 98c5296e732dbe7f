"""The console: a team's jobs, a job's runs over time, a run and its DAG, as server-rendered HTML and SVG.

One renderer (``console.render``) serves CloudWatch custom widgets in AWS and ``/console`` under
``make run``. No JavaScript (custom widgets allow none); colour is never the only signal: every outcome
has a symbol, and every cell a title.
"""
