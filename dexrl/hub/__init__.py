"""Dexbotic checkpoint folders and the Hugging Face hub.

``home`` says where downloads live, ``repos`` lists the known repositories, ``client`` calls the
hub and translates its errors, ``manifest`` records a verified download, ``download`` is the
download transaction, ``verify``/``weights`` decide whether a folder is a usable checkpoint, and
``libero_assets`` places LIBERO's scene assets.
"""
