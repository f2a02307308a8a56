"""Running a model: loading, the Session seam every decoder talks to, backends, prefix cache, cost model, selector loading."""
