"""nbgrader's exchange over HTTP, through a JupyterHub service that knows who is asking (no shared folder).

nbgrader's own exchange is a folder every student can write: file ownership is all that tells students apart, so
it needs a Unix user per learner on one machine. Here release, fetch, submit, list, collect and feedback travel to
a JupyterHub-managed service (`service`), which learns the caller from the hub's token and keeps the files where
only it can read them (`store`); the client side is nbgrader's exchange plugin interface (`client`, set by
`c.ExchangeFactory.*`), so the Assignment List, the formgrader and nbgrader's commands work unchanged.
"""
