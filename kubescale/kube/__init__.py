"""The Kubernetes access layer: the only code that talks to the API server.

Client set-up, informer caches and listers, writes with retries, events, leader election, and
small typed views of API objects (resource catalogue, selectors, quantities).
"""
