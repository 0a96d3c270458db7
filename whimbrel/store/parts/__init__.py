"""The store's parts with tables of their own, one module each (a feature's rows).

Every module here is a part: :func:`whimbrel.store.part.parts` imports each one and finds
its :class:`~whimbrel.store.part.Part` subclass, so a new part is one new module here and
no line anywhere else in the store.
"""
