"""Dashboard views: thin async edges that parse, call one service or selector, render."""
