"""Platforms: where and how a protocol is reached (SPEC §19) — ``base`` says what every
platform is; each other module is one platform. Listed in ``routing.protocols.registry``."""
