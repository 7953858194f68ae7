"""Ray Serve query endpoint. The application lives in :mod:`serving.app` (builder: ``serving.app:build_app``);
the HTTP bodies in :mod:`serving.schemas`. Nothing is imported here so ``import serving.schemas`` stays light."""
