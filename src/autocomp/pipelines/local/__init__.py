"""The local run: the three pipelines through kfp.local on this machine (run.py: one runner;
taskview.py: the live one-line-per-task view; capture.py: kfp.local's output into
<out>/logs/<task>.log and logs/kfp.log)."""
