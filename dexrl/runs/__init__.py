"""The run folder: the one owner of its layout and of everything written into it.

``layout`` names the files, ``settings`` points RLinf's outputs into the folder, ``record``
writes ``config.yaml``/``manifest.json``, ``opened`` reopens a (possibly moved) folder,
``checkpoints`` finds RLinf's ``global_step_N`` folders, ``resume_rules`` says what a resume may
change, ``state`` keeps the driver's record, and ``durable`` is the one durable writer.
"""
