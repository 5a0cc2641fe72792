#include "suites/model/model_case.hpp"

#include "engine/instantiate.hpp"

namespace shardcheck::check {

spec::OpSpec op_spec(const ModelCase& c) {
  return model_train_step_spec(c.cfg, c.par, c.sequences, c.seq_len);
}

template <class T>
ModelStepResult<T> LibraryModel::train_step(Communicator& world, const ModelCase& c,
                                            const ModelData<T>& dense) const {
  const ModelParams<T> shard = shard_model_params(c.cfg, c.par, dense.params, world.rank());
  return model_train_step(world, c.cfg, c.par, c.opt, shard, dense.batch);
}

#define SHARDCHECK_LIBRARY_MODEL(T)                                                        \
  template ModelStepResult<T> LibraryModel::train_step<T>(Communicator&, const ModelCase&, \
                                                          const ModelData<T>&) const;
SHARDCHECK_FOR_EACH_FLOAT_TYPE(SHARDCHECK_LIBRARY_MODEL)
#undef SHARDCHECK_LIBRARY_MODEL

// Every rank is given the case and the dense parameters and batch (model_impl.hpp).
template <class T>
ModelRun<T> run_ranks(const ModelImplementation& impl, const ModelCase& c, const ModelData<T>& d) {
  return run_on_ranks<ModelStepResult<T>>(
      c.world, [&](Communicator& comm) { return impl.train_step(comm, c, d); });
}

SHARDCHECK_INSTANTIATE_RUN_RANKS(ModelImplementation, ModelCase, ModelData, ModelRun)

}  // namespace shardcheck::check
