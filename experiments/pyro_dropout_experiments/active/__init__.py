"""``pyro-dropout active-learning``: Gal, Islam & Ghahramani (2017)'s MNIST acquisition experiment,
and Kirsch et al. (2019)'s Repeated MNIST, where BatchBALD is scored against the top k of BALD."""
