"""The simulated cluster: the actors (see ``actor``) that play controllers, scheduler, kubelet."""
