"""The manifest: a JSON description of a store (public format, docs/manifest.md). ``model``: what a manifest
describes; ``validate``: the JSON schema and Pulsar's semantic rules, all checked before anything changes;
``load``: a manifest into a store (``housekeeping load``; the generator goes through the same validation and
writer); ``export``: a store back in the same shape (``housekeeping inspect``)."""
