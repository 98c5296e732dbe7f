"""The Jobs table, one module per aggregate; ``adapters.aws.jobs_store.JobsStore`` composes them."""
