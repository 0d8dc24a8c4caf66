"""What an operator or a scraper reads about the running gateway, live: the routing and
health picture (``status``: ``/api/v1/status`` and the page's badges) and Prometheus
counters and gauges (``metrics``: ``/metrics``). Durable records are ``routing.audit``'s."""
