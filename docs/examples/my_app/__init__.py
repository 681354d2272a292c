"""Stands for your application's own code: the examples' workflows call its clients."""
