"""HTTP edge: Starlette routes, JSON in, engine requests and store calls, NDJSON/JSON out.

May import ``engine`` and ``store``; neither of them imports this package.
"""
