"""The Kubeflow pipelines (generate_benchmark, evaluate_models), their compile entry, the KFP
client verbs (upload, schedule, submit) and the local run through kfp.local."""
