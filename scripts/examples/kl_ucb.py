"""Writing your own policy: a Gaussian KL-UCB index on the weighted estimator of eq. (1)."""
import jax.numpy as jnp

import jaxbandit as jb
from jaxbandit import estimator


def kl_ucb(c: float = 0.0) -> jb.Policy:
    """argmax mu_hat + sqrt(2 (log t + c log log t) / zeta): side observations count in zeta."""

    def init_fn(ctx):
        return estimator.init(ctx.sigma.shape[-1], ctx.sigma.dtype)

    def select_fn(key, stats, t, ctx):
        zeta = estimator.weighted_counts(stats)
        log_t = jnp.log(t.astype(zeta.dtype))
        budget = log_t + ctx.params["c"] * jnp.log(jnp.maximum(log_t, 1.0))
        index = estimator.mean(stats) + jnp.sqrt(2 * budget / jnp.maximum(zeta, 1e-30))
        return jb.play(jnp.argmax(jnp.where(zeta > 0, index, jnp.inf)))

    def update_fn(stats, arm, values, ctx):
        return estimator.update(stats, arm, values, ctx.precision[arm])

    return jb.Policy(init_fn, select_fn, update_fn, consolidate_fn=estimator.consolidate,
                     name="kl_ucb", params={"c": c})


if __name__ == "__main__":
    instance = jb.instances.default_instances()["revealing_arm"]
    for c in (0.0, 3.0):
        result = jb.simulate(kl_ucb(c), instance, horizon=10_000, runs=100, seed=0)
        print(f"c = {c}: regret {result.final_regret.mean():.1f} +- {result.standard_error()[-1]:.1f}")
