"""The seam to upstreams: one client for every kind and platform
(``routing.upstream.openai.OpenAIClient``), told by the registry
(``routing.protocols.registry``) where and how to send."""
